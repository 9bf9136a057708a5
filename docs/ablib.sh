# Shared parts of the A/B scripts docs/bench64k-ab.sh, docs/skipwork.sh and
# docs/cpu-ab.sh, which source it from the repository root.

# ab_build DIR TARGET VARIANT=COMMIT...: extracts each commit into
# DIR/src-VARIANT and builds TARGET there (rxectl: the CLI; rxe.test: the
# rxe package's tests) as DIR/TARGET-VARIANT. Sets ab_variants to the
# variant names in order.
ab_build() {
	dir=$1 target=$2
	shift 2
	ab_variants=""
	for vc in "$@"; do
		v=${vc%%=*} c=${vc#*=}
		mkdir -p "$dir/src-$v"
		git archive "$c" | tar -x -C "$dir/src-$v"
		case $target in
		rxectl) (cd "$dir/src-$v" && go build -o "$dir/rxectl-$v" ./cmd/rxectl) ;;
		rxe.test) (cd "$dir/src-$v" && go test -c -o "$dir/rxe.test-$v" ./rxe) ;;
		*) echo "ab_build: unknown target $target" >&2 && return 2 ;;
		esac
		ab_variants="$ab_variants $v"
	done
}

# ab_order ROUND VARIANT...: prints the variants in the order of round
# ROUND: as given in odd rounds, reversed in even ones.
ab_order() {
	r=$1
	shift
	if [ $((r % 2)) -eq 0 ]; then
		for v in "$@"; do echo "$v"; done | tac | tr '\n' ' '
	else
		echo "$*"
	fi
}

# ab_bench64k ROUND VARIANT TESTBIN [NAME=VALUE...]: runs rxe's 64 KiB
# WRITE/READ/SEND benchmarks of TESTBIN (in the environment NAME=VALUE...)
# under the bench lock and docs/steal.sh, and prints their result lines
# as "rROUND VARIANT Benchmark...".
ab_bench64k() {
	r=$1 v=$2 bin=$3
	shift 3
	env "$@" flock /tmp/gorxe-bench.lock docs/steal.sh "$bin" -test.run '^$' \
		-test.bench '(Write|Read|Send)64K/udp' -test.benchtime 2s |
		grep '^Benchmark' | sed "s/^/r$r $v /"
}
