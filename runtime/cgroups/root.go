package cgroups

// RootLimits reads the limits of cfg's cgroup root itself: together with
// the machine, they bound what every Instance below it may take. A root
// not created yet bounds nothing (every field Absent).
func RootLimits(cfg Config) (Limits, error) {
	none := Limits{MemoryBytes: Absent, Pids: Absent, CPUQuotaMicros: Absent, CPUPeriod: Absent, CPUWeight: Absent}
	mode, h, err := detectOnce(cfg.MountRoot)
	if err != nil {
		return none, err
	}
	d := newDriver(mode, h)
	if !d.exists(cfg.root()) {
		return none, nil
	}
	return d.limits(cfg.root())
}
