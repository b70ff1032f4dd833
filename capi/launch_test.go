package capi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pdcgo/pdc/internal/cluster"
)

// The README's launcher recipes ("By hand or under a launcher") are run
// here as written: the secret block, then the launcher's block, in bash
// with `set -euo pipefail`, with $SHARED a fresh dir and the installed
// libpdc programs first on PATH. A README edit that breaks a recipe fails
// these tests.

// launchersRequired makes a missing launcher fail the test instead of
// skipping it: CI installs them and sets it.
const launchersRequired = "PDC_LAUNCHERS_REQUIRED"

func needLauncher(t *testing.T, tools ...string) {
	t.Helper()
	needC(t)
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv(launchersRequired) == "1" {
				t.Fatalf("%s is not installed, and $%s=1: %v", tool, launchersRequired, err)
			}
			t.Skipf("needs %s (.ci/run installs it): %v", tool, err)
		}
	}
}

// readmeBlock returns the shell block the README marks with
// `<!-- launch: name -->`.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)<!-- launch: " + regexp.QuoteMeta(name) + " -->\n```sh\n(.*?)```")
	m := re.FindSubmatch(readme)
	if m == nil {
		t.Fatalf("README.md has no block marked <!-- launch: %s --> followed by a ```sh fence", name)
	}
	return string(m[1])
}

// runRecipe runs the README's secret block and the named launcher block
// in a fresh directory and returns what they printed. Whatever the recipe
// leaves running when it fails is killed.
func runRecipe(t *testing.T, launcher string, env ...string) string {
	t.Helper()
	ctx := testCtx(t)
	prefix := installLibpdc(t, ctx)
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	script := readmeBlock(t, "secret") + readmeBlock(t, launcher)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SHARED="+shared, "PATH="+filepath.Join(prefix, "bin")+":"+os.Getenv("PATH"))
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	// Servers a launcher started outside this process group (slurmd's)
	// would outlive a failed recipe.
	if l, lerr := cluster.ReadList(filepath.Join(shared, "pdc_tmp")); lerr == nil {
		for _, s := range l.Servers {
			if s.PID > 0 && cluster.Running(s.PID) {
				_ = syscall.Kill(s.PID, syscall.SIGKILL)
			}
		}
	}
	if err != nil {
		t.Fatalf("the README's %s recipe failed: %v\nscript:\n%s\noutput:\n%s", launcher, err, script, out.String())
	}
	return out.String()
}

// checkRecipe checks that the recipe's three servers answered, each of
// its four VPIC-IO ranks wrote and each BD-CATS rank read its particles
// back (BD-CATS checks every value), and pdc down stopped the servers.
func checkRecipe(t *testing.T, out string) {
	t.Helper()
	for r := range 3 {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d \(.*\): pong in `, r)).MatchString(out) {
			t.Errorf("pdc ping --wait shows no answer from rank %d", r)
		}
	}
	for _, prog := range []string{"vpicio", "bdcats"} {
		for r := range 4 {
			if !regexp.MustCompile(fmt.Sprintf(`(?m)^%s run=r1 rank=%d size=4 n=65536 bytes=2097152 `, prog, r)).MatchString(out) {
				t.Errorf("no line from %s rank %d", prog, r)
			}
		}
	}
	if !strings.Contains(out, "stopped 3 servers") {
		t.Errorf("pdc down did not stop 3 servers")
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestReadmeLaunchMPIExec(t *testing.T) {
	needLauncher(t, "mpiexec")
	checkRecipe(t, runRecipe(t, "mpiexec"))
}

func TestReadmeLaunchSlurm(t *testing.T) {
	needLauncher(t, "slurmctld", "slurmd", "srun", "sinfo", "munged")
	if os.Geteuid() != 0 {
		if os.Getenv(launchersRequired) == "1" {
			t.Fatalf("a one-node Slurm runs its daemons as root; $%s=1", launchersRequired)
		}
		t.Skip("a one-node Slurm runs its daemons as root")
	}
	conf := startSlurm(t)
	checkRecipe(t, runRecipe(t, "slurm", "SLURM_CONF="+conf))
}

// startSlurm starts munged, slurmctld and slurmd on this machine, each in
// the foreground as a child of the test with its files in a temporary
// dir, and waits until the node takes jobs. It returns the slurm.conf
// path for $SLURM_CONF.
func startSlurm(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pdc-slurm-") // short: the munge socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"state", "spool", "log"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "munge.key"), key, 0o400); err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	sock := filepath.Join(dir, "munge.sock")
	conf := filepath.Join(dir, "slurm.conf")
	text := slurmConf(host, freePort(t), freePort(t), sock, dir)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	daemon := func(name string, args ...string) { t.Helper(); startDaemon(t, dir, conf, name, args...) }
	daemon("munged", "-F", "-f", "-S", sock, "--key-file", filepath.Join(dir, "munge.key"),
		"--pid-file", filepath.Join(dir, "munged.pid"), "--log-file", filepath.Join(dir, "log", "munged.log"),
		"--seed-file", filepath.Join(dir, "munge.seed"))
	waitFor(t, "munged's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	daemon("slurmctld", "-D", "-f", conf)
	daemon("slurmd", "-D", "-f", conf)
	waitFor(t, "the Slurm node to be idle", func() bool {
		cmd := exec.Command("sinfo", "-h", "-N", "-o", "%t")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.Output()
		return err == nil && strings.TrimSpace(string(out)) == "idle"
	})
	// Jobs a failed recipe left behind end with the daemons; cancel them
	// first so that slurmd stops their tasks.
	t.Cleanup(func() {
		cmd := exec.Command("scancel", "--full", "--user", "root")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		_ = cmd.Run()
	})
	return conf
}

// startDaemon starts a Slurm or munge daemon with conf in the foreground,
// its output in dir/log; the test's cleanup stops it, printing its logs if
// the test failed.
func startDaemon(t *testing.T, dir, conf, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	log, err := os.Create(filepath.Join(dir, "log", name+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
		if t.Failed() {
			for _, f := range []string{name + ".out", "slurmctld.log", "slurmd.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, "log", f)); err == nil && len(b) > 0 {
					t.Logf("%s:\n%s", f, tail(b, 3000))
				}
			}
		}
	})
}

// slurmConf is a one-node Slurm's configuration. config_overrides: the
// node is declared with more CPUs than a CI machine has, so that 3 servers
// and 4 clients run at once.
func slurmConf(host string, ctlPort, dPort int, sock, dir string) string {
	return fmt.Sprintf(`ClusterName=pdctest
SlurmctldHost=%[1]s
SlurmctldPort=%[2]d
SlurmdPort=%[3]d
AuthType=auth/munge
AuthInfo=socket=%[4]s
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=%[5]s/state
SlurmdSpoolDir=%[5]s/spool
SlurmctldPidFile=%[5]s/slurmctld.pid
SlurmdPidFile=%[5]s/slurmd.pid
SlurmctldLogFile=%[5]s/log/slurmctld.log
SlurmdLogFile=%[5]s/log/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName=%[1]s CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
`, host, ctlPort, dPort, sock, dir)
}

// waitFor polls cond until it holds or a minute passes: the Slurm daemons
// raise no event a test can block on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		<-tick.C
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
