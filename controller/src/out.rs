//! Standard output that a closed pipe does not break: `weft validate *.yaml | head -1` must
//! neither panic nor stop halfway. Once the reader is gone, output is dropped and the command
//! runs to its end, so its exit status still says what it found.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static CLOSED: AtomicBool = AtomicBool::new(false);

/// True once a write found the reader gone.
pub fn closed() -> bool {
    CLOSED.load(Ordering::Relaxed)
}

/// Standard output, locked; writes after the reader went away succeed and go nowhere.
pub struct Stdout(io::StdoutLock<'static>);

pub fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

fn swallow(r: io::Result<()>) -> io::Result<()> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        r => r,
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if closed() {
            return Ok(buf.len());
        }
        match self.0.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                CLOSED.store(true, Ordering::Relaxed);
                Ok(buf.len())
            }
            r => r,
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        if closed() {
            return Ok(());
        }
        swallow(self.0.write_all(buf))
    }
    fn flush(&mut self) -> io::Result<()> {
        if closed() {
            return Ok(());
        }
        swallow(self.0.flush())
    }
}

/// `println!` that survives a closed pipe.
#[macro_export]
macro_rules! outln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::out::stdout(), $($arg)*);
    }};
}

/// `print!` that survives a closed pipe.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!($crate::out::stdout(), $($arg)*);
    }};
}

/// An error for the operator on standard error (a JSON line with `--log-format json`); survives
/// a closed standard error (`weft ... 2>&1 | head -1`).
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::logging::say($crate::logging::Say::Error, &format!($($arg)*), &[])
    };
}

/// A warning for the operator on standard error, as [`errln!`].
#[macro_export]
macro_rules! warnln {
    ($($arg:tt)*) => {
        $crate::logging::say($crate::logging::Say::Warn, &format!($($arg)*), &[])
    };
}

/// What the command did, for the operator on standard error, as [`errln!`].
#[macro_export]
macro_rules! infoln {
    ($($arg:tt)*) => {
        $crate::logging::say($crate::logging::Say::Info, &format!($($arg)*), &[])
    };
}
