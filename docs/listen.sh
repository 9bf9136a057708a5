# Sourced by the measurement scripts in docs/ that start an rxectl server
# and then its client.
#
# wait_listen PORT: wait up to 5 s for a TCP listener on PORT (the
# server's exchange port); fails if none appears.
wait_listen() {
	i=0
	until ss -ltn "sport = :$1" | grep -q LISTEN; do
		i=$((i + 1))
		[ "$i" -lt 100 ] || return 1
		sleep 0.05
	done
}
