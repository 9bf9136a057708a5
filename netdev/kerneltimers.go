package netdev

// KernelTimers reports true: a UDPConn's reads and writes block in the
// kernel, so a device on it arms its short timers on a kernel timer (the
// optional capability rxe.KernelTimers).
func (c *UDPConn) KernelTimers() bool { return true }
