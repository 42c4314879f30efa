// Copyright 2026 The liqo-go authors. Licensed under the Apache License, Version 2.0.

package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Process is one running component of a cluster.
type Process struct {
	// Name is the component's name, e.g. "kube-apiserver".
	Name string
	// PID is the process ID, which is also its process-group ID.
	PID int
	// LogPath is the file its standard output and error go to.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	// bin and args are the component's own command, without the
	// supervisor's.
	bin  string
	args []string
}

// startProcess runs bin with args in its own process group, logging to
// <logDir>/<name>.log. When detach is false the kernel kills it if the
// calling process dies, so that an interrupted test leaves nothing behind.
// With cpus, the process (and every thread it makes) runs on those CPUs
// only.
func startProcess(name, bin string, args []string, logDir string, detach bool, cpus []int) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor

	cmd := exec.Command(bin, args...) //nolint:noctx // the harness's own binaries, stopped by Stop, not by a context
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = os.Environ()
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	if err := startOn(cmd, cpus); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &Process{Name: name, PID: cmd.Process.Pid, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit status is reported through Exited and the log
		close(p.done)
	}()
	return p, nil
}

// startOn starts cmd on cpus: a child inherits the CPU affinity of the
// thread that forks it, so this thread is pinned for the fork and then
// restored.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("reading the CPU affinity: %w", err)
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning to CPUs %v: %w", cpus, err)
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()
	return cmd.Start()
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	if p.done == nil {
		return !alive(p.PID)
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop ends the process group: SIGTERM, then SIGKILL after grace.
func (p *Process) Stop(grace time.Duration) {
	killGroup(p.PID, grace, p.done)
}

// Tail returns the last n lines of the process's log, to explain a failure.
func (p *Process) Tail(n int) string {
	return tailFile(p.LogPath, n)
}

// killGroup terminates the process group led by pid. done, when not nil,
// closes when the caller's Wait on the leader returns; without it (a
// process started by another command) the group is polled.
func killGroup(pid int, grace time.Duration, done <-chan struct{}) {
	if pid <= 0 {
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	deadline := time.After(grace)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if done != nil {
			select {
			case <-done:
				_ = syscall.Kill(-pid, syscall.SIGKILL) // stragglers in the group
				return
			default:
			}
		} else if !groupAlive(pid) {
			return
		}
		select {
		case <-deadline:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			if done != nil {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
				}
			} else {
				waitGone(pid, 5*time.Second)
			}
			return
		case <-tick.C:
		}
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func groupAlive(pgid int) bool {
	return syscall.Kill(-pgid, 0) == nil && alive(pgid)
}

func waitGone(pid int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// ProcessesReferencing returns the PIDs of live processes whose command line
// mentions dir. Every process the harness starts names its cluster
// directory in its arguments, so this finds them wherever they came from.
func ProcessesReferencing(dir string) ([]int, error) {
	if dir == "" {
		return nil, errors.New("empty directory")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	// Arguments name files inside dir, so matching "dir/" keeps a cluster
	// from claiming the processes of a sibling whose name extends its own.
	needle := []byte(strings.TrimSuffix(dir, "/") + "/")
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, needle) || !alive(pid) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// Reap kills every process whose command line mentions dir and returns how
// many there were. It is the safety net behind Stop and StopDir.
func Reap(dir string) (int, error) {
	pids, err := ProcessesReferencing(dir)
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		waitGone(pid, 5*time.Second)
	}
	return len(pids), nil
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Command returns the binary and arguments the process was started with,
// so that a stopped component can be launched again as it was.
func (p *Process) Command() (bin string, args []string) {
	if p.bin != "" {
		return p.bin, append([]string(nil), p.args...)
	}
	return p.cmd.Path, append([]string(nil), p.cmd.Args[1:]...)
}
