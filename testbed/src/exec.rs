//! Running commands and processes: to completion (stderr the error), with input, in the
//! background with a log; waiting on a condition; signals by PID.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Result, TestbedError, io};
use crate::state::ProcState;

/// Runs a command to completion; its stderr becomes the error.
pub fn run(cmd: &[&str]) -> Result<String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(io(format!("running {}", cmd[0])))?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            cmd: cmd.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a command with `input` on its stdin (`ip -batch -`, `tc -batch -`).
pub(crate) fn run_input(cmd: &[&str], input: &str) -> Result<()> {
    use std::io::Write;
    let mut child = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io(format!("running {}", cmd[0])))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(io(format!("writing to {}", cmd[0])))?;
    }
    let out = child
        .wait_with_output()
        .map_err(io(format!("running {}", cmd[0])))?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            cmd: cmd.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

pub(crate) fn spawn(name: &str, cmd: &[String], log: &Path) -> Result<ProcState> {
    let out = fs::File::create(log).map_err(io(format!("creating {}", log.display())))?;
    let err = out.try_clone().map_err(io("log file"))?;
    let child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(io(format!("starting {}", cmd[0])))?;
    Ok(ProcState {
        name: name.to_string(),
        pid: child.id(),
        log: log.to_path_buf(),
        cmd: cmd.to_vec(),
    })
}

pub(crate) fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(TestbedError::Other(format!(
        "timed out after {timeout:?} waiting for {what}"
    )))
}

pub fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| s.split_whitespace().nth(2).is_none_or(|st| st != "Z"))
            .unwrap_or(false)
}

pub(crate) fn kill(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Kills a child by PID if it is still running when dropped (a failed step must not leave a
/// receiver behind in a host namespace).
pub(crate) struct Reap(pub(crate) std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_command_is_an_error_with_its_command_line_and_stderr() {
        assert_eq!(run(&["echo", "hi"]).expect("echo"), "hi\n");
        let e = run(&["sh", "-c", "echo broken >&2; exit 3"]).expect_err("fails");
        assert_eq!(
            e.to_string(),
            "`sh -c echo broken >&2; exit 3` failed: broken"
        );
        let e = run(&["/nonexistent/weft-no-such-program"]).expect_err("missing");
        assert!(
            e.to_string()
                .starts_with("running /nonexistent/weft-no-such-program: "),
            "{e}"
        );
    }

    #[test]
    fn input_reaches_the_command_and_its_failure_is_reported() {
        run_input(&["sh", "-c", "read l; test \"$l\" = batch"], "batch\n").expect("read");
        let e = run_input(&["sh", "-c", "cat >/dev/null; echo no >&2; false"], "x").expect_err("x");
        assert!(e.to_string().ends_with("failed: no"), "{e}");
    }

    #[test]
    fn waiting_ends_when_the_condition_holds_or_names_what_it_waited_for() {
        let mut n = 0;
        wait_for("three calls", Duration::from_secs(5), || {
            n += 1;
            n == 3
        })
        .expect("holds");
        let e = wait_for("nothing", Duration::from_millis(60), || false).expect_err("times out");
        assert_eq!(e.to_string(), "timed out after 60ms waiting for nothing");
    }

    #[test]
    fn a_spawned_process_logs_to_its_file_and_is_seen_alive_until_reaped() {
        let dir = std::env::temp_dir().join(format!("weft-testbed-exec-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("sleep.log");
        let p = spawn("sleep", &["sleep".into(), "30".into()], &log).expect("spawn");
        assert_eq!((p.name.as_str(), p.log.as_path()), ("sleep", log.as_path()));
        assert!(pid_alive(p.pid));
        kill(p.pid, "-KILL");
        // Not our child's parent: it stays a zombie until this process exits, which counts as
        // not alive.
        wait_for("the killed process", Duration::from_secs(10), || {
            !pid_alive(p.pid)
        })
        .expect("killed");
        let _ = fs::remove_dir_all(&dir);
    }
}
