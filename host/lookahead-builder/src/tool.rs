//! Running external tools with errors that show the command line.

use std::process::{Command, Output};

use crate::BuildError;

/// Renders a command for error messages.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for arg in cmd.get_args() {
        s.push(' ');
        s.push_str(&arg.to_string_lossy());
    }
    s
}

/// Runs `cmd`, returning its output if it exited successfully.
pub(crate) fn run(cmd: &mut Command) -> Result<Output, BuildError> {
    let out = cmd.output().map_err(|e| BuildError::ToolFailed {
        command: describe(cmd),
        status: "an error starting it".into(),
        stderr: e.to_string(),
    })?;
    if out.status.success() {
        Ok(out)
    } else {
        let mut text = String::from_utf8_lossy(&out.stderr).into_owned();
        if text.trim().is_empty() {
            text = String::from_utf8_lossy(&out.stdout).into_owned();
        }
        Err(BuildError::ToolFailed {
            command: describe(cmd),
            status: out.status.to_string(),
            stderr: text,
        })
    }
}

/// Runs `cmd` and returns its standard output as text, or `None` if it could not run.
pub(crate) fn stdout_of(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
