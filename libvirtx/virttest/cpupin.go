package virttest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinCPU is the CPU list (taskset --cpu-list) that libvirtd starts on: the
// lowest CPU this process may run on. libvirt reads the host's CPUID when
// the qemu driver starts and finds the cached capabilities stale when it
// differs from what the cache holds; CPUID leaf 0x1f (and 0xb) report the
// x2APIC id of the CPU that asks, so a daemon started on another CPU than
// the one that filled the cache probes the emulator again.
func pinCPU() (string, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return "", fmt.Errorf("sched_getaffinity: %w", err)
	}
	for cpu := 0; cpu < len(set)*64; cpu++ {
		if set.IsSet(cpu) {
			return strconv.Itoa(cpu), nil
		}
	}
	return "", errors.New("sched_getaffinity: no CPU in this process's set")
}

// unpin gives every thread of process pid the CPUs this process may run on
// (taskset --all-tasks --pid), once libvirtd has read the CPUID and checked
// its cache. Threads it starts later inherit the mask of the thread that
// starts them.
func unpin(pid int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_getaffinity: %w", err)
	}
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sched_setaffinity %d: %w", tid, err)
		}
	}
	return nil
}
