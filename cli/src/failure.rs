//! How a command fails: the message it ends with and its exit code.

use std::process::ExitCode;

/// Why a command failed, and its exit code: 2 for bad input (as clap's own usage errors),
/// 1 for anything else.
pub struct Failure {
    message: String,
    code: u8,
    /// Already written to the service's log.
    logged: bool,
}

impl Failure {
    pub fn input(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 2,
            logged: false,
        }
    }

    pub fn runtime(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code: 1,
            logged: false,
        }
    }

    /// The same failure, marked as written to the log ([`Failure::exit`] prints it no more).
    pub fn logged(self) -> Failure {
        Failure {
            logged: true,
            ..self
        }
    }

    /// What went wrong, in words.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Ends the process's output with the message (unless the log has it already), and
    /// gives the exit code.
    pub fn exit(self) -> ExitCode {
        if !self.logged {
            eprintln!("idgen: {}", self.message);
        }
        ExitCode::from(self.code)
    }
}
