package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModifyResetToErrRefused: RESET leads only to RESET and INIT, for
// every QP type (kernel ib_modify_qp_is_ok has no RESET→ERR entry, so rxe
// refuses it with EINVAL); from INIT on, ERR is reachable.
func TestModifyResetToErrRefused(t *testing.T) {
	da, _ := newDevices(t, "pipe")
	for _, typ := range []QPType{QPTypeRC, QPTypeUC, QPTypeUD} {
		t.Run(typ.String(), func(t *testing.T) {
			e := newTypedEnd(t, da, typ)
			err := e.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState)
			require.ErrorIs(t, err, ErrInvalidState)
			require.Contains(t, err.Error(), "RESET to ERR")
			require.Equal(t, QPSReset, e.qp.State(), "a refused Modify changes nothing")
			require.NoError(t, e.qp.Modify(&QPAttr{State: QPSReset}, QPAttrState), "RESET to RESET stays allowed")

			init := QPAttr{State: QPSInit, Port: 1, AccessFlags: AccessRemoteWrite}
			mask := QPAttrState | QPAttrPKeyIndex | QPAttrPort | QPAttrAccessFlags
			if typ == QPTypeUD {
				init.QKey, mask = 0x11111111, QPAttrState|QPAttrPKeyIndex|QPAttrPort|QPAttrQKey
			}
			require.NoError(t, e.qp.Modify(&init, mask))
			require.NoError(t, e.qp.Modify(&QPAttr{State: QPSErr}, QPAttrState), "INIT to ERR")
			require.Equal(t, QPSErr, e.qp.State())
		})
	}
}
