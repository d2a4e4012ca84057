package cpuvendor

func intel() bool
