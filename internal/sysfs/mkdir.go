package sysfs

import (
	"io/fs"
	"os"
	"syscall"
)

// Mkdirer is an FS that can create directories: configfs groups such as
// /sys/kernel/config/rdma_cm/<ibdev> are made by mkdir(2).
type Mkdirer interface {
	Mkdir(path string) error
}

// Mkdir implements Mkdirer ("mkdir $path").
func (d Dir) Mkdir(path string) error { return os.Mkdir(d.real(path), 0o755) }

// Mkdir creates path on f ("mkdir $path"); EOPNOTSUPP when f cannot.
func Mkdir(f FS, path string) error {
	m, ok := f.(Mkdirer)
	if !ok {
		return &fs.PathError{Op: "mkdir", Path: path, Err: syscall.EOPNOTSUPP}
	}
	return m.Mkdir(path)
}
