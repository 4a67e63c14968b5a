//! Error types. Every failure names what it was about (table, field, entry) so a caller can
//! answer an operator without extra context.

use std::fmt;

use tonic::Code;

/// What kind of P4 object a name or id refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Table,
    MatchField,
    Action,
    ActionParam,
    ActionProfile,
    Counter,
    DirectCounter,
    Meter,
    DirectMeter,
    Register,
    ControllerHeader,
    PacketMetadata,
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjectKind::Table => "table",
            ObjectKind::MatchField => "match field",
            ObjectKind::Action => "action",
            ObjectKind::ActionParam => "action parameter",
            ObjectKind::ActionProfile => "action profile",
            ObjectKind::Counter => "counter",
            ObjectKind::DirectCounter => "direct counter",
            ObjectKind::Meter => "meter",
            ObjectKind::DirectMeter => "direct meter",
            ObjectKind::Register => "register",
            ObjectKind::ControllerHeader => "controller packet header",
            ObjectKind::PacketMetadata => "packet metadata field",
        })
    }
}

/// The match kind of a field, as declared in the P4Info.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Lpm,
    Ternary,
    Range,
    Optional,
    /// An architecture-specific kind (`other_match_type`), which this client cannot build.
    Other,
}

impl fmt::Display for MatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MatchKind::Exact => "exact",
            MatchKind::Lpm => "lpm",
            MatchKind::Ternary => "ternary",
            MatchKind::Range => "range",
            MatchKind::Optional => "optional",
            MatchKind::Other => "other",
        })
    }
}

/// One update of a Write that the switch refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateError {
    /// Position of the update in the slice given to `write`.
    pub index: usize,
    /// INSERT, MODIFY or DELETE.
    pub update_type: &'static str,
    /// The entry, with names from the P4Info where known
    /// (`table ingress.route {hdr.ipv4.dst=0x0a0000/8}`).
    pub entity: String,
    /// Canonical gRPC code of this update's failure.
    pub code: Code,
    pub message: String,
    /// Error space and code of the target (e.g. BMv2's `ALL-sswitch-p4org`).
    pub space: String,
    pub target_code: i32,
}

impl fmt::Display for UpdateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} failed: {:?}: {}",
            self.update_type, self.entity, self.code, self.message
        )
    }
}

/// The failed updates of one `write` call (the others were applied).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteErrors {
    pub total: usize,
    pub failed: Vec<UpdateError>,
}

impl fmt::Display for WriteErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} of {} updates failed", self.failed.len(), self.total)?;
        for e in self.failed.iter().take(5) {
            write!(f, "; {e}")?;
        }
        if self.failed.len() > 5 {
            write!(f, "; ...")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown {kind} `{name}`{}{}", in_scope(.scope), did_you_mean(.suggestion))]
    UnknownName {
        kind: ObjectKind,
        name: String,
        /// The enclosing object (`table ingress.route` for a match field).
        scope: Option<String>,
        /// The nearest known name, if one is close.
        suggestion: Option<String>,
    },

    #[error("unknown {kind} id {id}{}", in_scope(.scope))]
    UnknownId {
        kind: ObjectKind,
        id: u32,
        scope: Option<String>,
    },

    #[error("value for {what} needs {value_bits} bits, wider than its bitwidth {bitwidth}")]
    ValueTooWide {
        what: String,
        bitwidth: u32,
        value_bits: u32,
    },

    #[error("{what}: {problem}")]
    InvalidValue { what: String, problem: String },

    #[error("match field {field} of table {table} is {declared}, not {used}")]
    MatchKindMismatch {
        table: String,
        field: String,
        declared: MatchKind,
        used: MatchKind,
    },

    #[error("match field {field} of table {table} is given twice")]
    DuplicateMatch { table: String, field: String },

    #[error("table {table} has ternary, range or optional fields and needs a priority > 0")]
    MissingPriority { table: String },

    #[error("action {action} is not allowed in table {table}")]
    ActionNotInTable { table: String, action: String },

    #[error("action {action} is missing parameter {param}")]
    MissingParam { action: String, param: String },

    #[error("parameter {param} of action {action} is given twice")]
    DuplicateParam { action: String, param: String },

    #[error("table entry for {table} has no action")]
    NoAction { table: String },

    #[error("table {table} {problem}")]
    TableImplementation { table: String, problem: String },

    #[error("cannot read {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },

    #[error("malformed P4Info: {0}")]
    P4Info(String),

    #[error("invalid client configuration: {0}")]
    Config(String),

    #[error("cannot connect to {endpoint}: {source}")]
    Connect {
        endpoint: String,
        source: tonic::transport::Error,
    },

    /// The switch answered an RPC with a non-OK status.
    #[error("{op} failed: {code:?}: {message}")]
    Rpc {
        op: &'static str,
        code: Code,
        message: String,
    },

    /// The switch does not implement this (BMv2 answers UNIMPLEMENTED to register access).
    #[error("{op} is not supported by the switch: {message}")]
    Unimplemented { op: &'static str, message: String },

    /// The switch refused because this client is not primary (PERMISSION_DENIED).
    #[error("{op} refused: this client is not primary: {message}")]
    NotPrimary { op: &'static str, message: String },

    #[error("{0}")]
    Write(WriteErrors),

    /// The switch sent something that does not follow P4Runtime.
    #[error("malformed response from the switch: {0}")]
    Malformed(String),

    #[error("the stream channel to the switch is not connected")]
    Disconnected,

    #[error("the client was shut down")]
    Closed,

    #[error("timed out after {0:?} waiting for {1}")]
    Timeout(std::time::Duration, &'static str),
}

impl Error {
    /// Maps a gRPC status of RPC `op` to the most specific variant.
    pub(crate) fn from_status(op: &'static str, status: &tonic::Status) -> Self {
        let message = status.message().to_string();
        match status.code() {
            Code::Unimplemented => Error::Unimplemented { op, message },
            Code::PermissionDenied => Error::NotPrimary { op, message },
            code => Error::Rpc { op, code, message },
        }
    }

    /// The gRPC code behind this error, if it came from the switch.
    pub fn code(&self) -> Option<Code> {
        match self {
            Error::Rpc { code, .. } => Some(*code),
            Error::Unimplemented { .. } => Some(Code::Unimplemented),
            Error::NotPrimary { .. } => Some(Code::PermissionDenied),
            _ => None,
        }
    }
}

fn in_scope(scope: &Option<String>) -> String {
    scope
        .as_ref()
        .map(|s| format!(" in {s}"))
        .unwrap_or_default()
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion
        .as_ref()
        .map(|s| format!(" (did you mean `{s}`?)"))
        .unwrap_or_default()
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
