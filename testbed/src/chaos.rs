//! Faults on purpose, for operators and the chaos trials: `weft testbed kill|restart FILE SWITCH
//! plugin|bmv2|redis`. A kill is SIGKILL, as a crash; a restart starts the process again with
//! the command line the state file recorded and records the new PID there, so `testbed down`
//! and `testbed status` see the new process.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::{Result, State, TestbedError, kill_process, pid_alive, restart_process};

/// One of a switch's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    Plugin,
    Bmv2,
    Redis,
}

impl Part {
    pub const ALL: [Part; 3] = [Part::Plugin, Part::Bmv2, Part::Redis];

    pub fn word(self) -> &'static str {
        match self {
            Part::Plugin => "plugin",
            Part::Bmv2 => "bmv2",
            Part::Redis => "redis",
        }
    }

    /// Its name in the state file (`plugin leaf1`).
    pub fn process_name(self, switch: &str) -> String {
        format!("{} {switch}", self.word())
    }
}

/// A word that names none of a switch's processes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}: expected plugin, bmv2 or redis")]
pub struct UnknownPart(pub String);

impl std::str::FromStr for Part {
    type Err = UnknownPart;
    fn from_str(s: &str) -> std::result::Result<Part, UnknownPart> {
        Part::ALL
            .into_iter()
            .find(|p| p.word() == s)
            .ok_or_else(|| UnknownPart(s.to_string()))
    }
}

fn check(st: &State, switch: &str, part: Part) -> Result<String> {
    if st.switch(switch).is_none() {
        return Err(TestbedError::Other(format!(
            "testbed {} has no switch {switch}",
            st.fabric
        )));
    }
    let name = part.process_name(switch);
    if !st.processes.iter().any(|p| p.name == name) {
        return Err(TestbedError::Other(format!(
            "testbed {} runs no {} on {switch}{}",
            st.fabric,
            part.word(),
            if st.db_only() { " (--db-only)" } else { "" }
        )));
    }
    Ok(name)
}

/// SIGKILLs one process of a switch; its PID (already gone: `Ok` all the same).
pub fn kill(dir: &Path, switch: &str, part: Part) -> Result<u32> {
    let st = State::load(dir)?;
    let name = check(&st, switch, part)?;
    kill_process(dir, &name)
}

/// Starts one process of a switch again (SIGKILLed first if it still runs) and waits until it
/// runs (a redis-server: until it answers); the new PID.
pub fn restart(dir: &Path, switch: &str, part: Part) -> Result<u32> {
    let st = State::load(dir)?;
    let name = check(&st, switch, part)?;
    if st
        .processes
        .iter()
        .any(|p| p.name == name && pid_alive(p.pid))
    {
        kill_process(dir, &name)?;
    }
    let pid = restart_process(dir, &name)?;
    let t0 = Instant::now();
    let ready = |st: &State| -> bool {
        if !pid_alive(pid) {
            return false;
        }
        match part {
            Part::Redis => st.switch(switch).is_some_and(|s| redis_answers(&s.db)),
            // Give it a moment to fail on a bad command line.
            Part::Plugin | Part::Bmv2 => t0.elapsed() > Duration::from_millis(300),
        }
    };
    while !ready(&st) {
        if !pid_alive(pid) {
            return Err(TestbedError::Other(format!(
                "{name} exited right after its restart (pid {pid}); see its log"
            )));
        }
        if t0.elapsed() > Duration::from_secs(20) {
            return Err(TestbedError::Other(format!(
                "{name} restarted (pid {pid}) but not ready within 20s"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(pid)
}

/// A PING to the redis-server of a DB endpoint answers PONG.
fn redis_answers(db: &str) -> bool {
    use std::io::{Read, Write};
    let ping = |s: &mut dyn ReadWrite| -> bool {
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 16];
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
    };
    trait ReadWrite: Read + Write {}
    impl<T: Read + Write> ReadWrite for T {}
    let db = db.split_once('?').map_or(db, |(d, _)| d);
    if let Some(path) = crate::unix_path(db) {
        return std::os::unix::net::UnixStream::connect(path).is_ok_and(|mut s| {
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            ping(&mut s)
        });
    }
    if let Some(port) = crate::tcp_port(db) {
        return std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            ping(&mut s)
        });
    }
    false
}

/// What `testbed status` says after NOT RUNNING: how to bring it back.
pub fn restart_hint(fabric: &str, process_name: &str) -> Option<String> {
    let (word, switch) = process_name.split_once(' ')?;
    let part: Part = word.parse().ok()?;
    Some(format!(
        "restart: weft testbed restart {fabric} {switch} {}",
        part.word()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_is_named_by_its_word_in_commands_and_the_state_file() {
        for p in Part::ALL {
            assert_eq!(p.word().parse::<Part>(), Ok(p));
        }
        assert_eq!(Part::Bmv2.process_name("leaf1"), "bmv2 leaf1");
        assert_eq!(
            "switch".parse::<Part>().expect_err("unknown").to_string(),
            "switch: expected plugin, bmv2 or redis"
        );
    }

    #[test]
    fn a_process_is_killed_only_on_a_switch_that_runs_it() {
        let dir = std::path::Path::new("/nonexistent");
        let mut st = crate::fixtures::state(dir);
        assert_eq!(
            check(&st, "spine1", Part::Bmv2).ok().as_deref(),
            Some("bmv2 spine1")
        );
        let e = check(&st, "leaf9", Part::Bmv2).expect_err("no switch");
        assert_eq!(e.to_string(), "testbed lab has no switch leaf9");
        let e = check(&st, "leaf1", Part::Plugin).expect_err("not running there");
        assert_eq!(e.to_string(), "testbed lab runs no plugin on leaf1");
        st.hosts.clear();
        st.processes.retain(|p| p.name.starts_with("redis "));
        let e = check(&st, "spine1", Part::Bmv2).expect_err("db only");
        assert_eq!(
            e.to_string(),
            "testbed lab runs no bmv2 on spine1 (--db-only)"
        );
    }
}
