//! How the command-line examples stop: an exit status and one line, returned by their `cli`
//! so that the hostile tests can run them in-process.

/// Why the program stopped: the exit status and a one-line message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// 2 for bad arguments, 1 for a failure.
    pub code: u8,
    /// One line, without the program's `name: ` prefix.
    pub message: String,
}

/// Bad arguments: status 2.
pub fn bad(message: impl Into<String>) -> Exit {
    Exit {
        code: 2,
        message: message.into(),
    }
}

/// A failure while running or writing: status 1.
pub fn failed(message: impl std::fmt::Display) -> Exit {
    // Keep it on one line whatever the error's own text holds.
    Exit {
        code: 1,
        message: message.to_string().replace('\n', " "),
    }
}
