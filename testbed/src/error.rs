//! The testbed's error type.

#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{cmd}` failed: {stderr}")]
    Command { cmd: String, stderr: String },
    #[error("{0} not found: {1}")]
    Missing(&'static str, String),
    #[error("{0}")]
    Other(String),
}

pub type Result<T> = std::result::Result<T, TestbedError>;

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TestbedError {
    let what = what.into();
    move |source| TestbedError::Io { what, source }
}
