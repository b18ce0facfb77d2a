//! What the commands write on stdout: lines, a JSON array of strings, a body as a line of
//! JSON.

use std::io::{BufWriter, StdoutLock, Write};

use crate::failure::Failure;

/// One line each.
pub fn write_lines(lines: &[String]) -> Result<(), Failure> {
    write_buffered(|out| lines.iter().try_for_each(|line| writeln!(out, "{line}")))
}

/// One JSON array of strings, on a line of its own.
pub fn write_json_array(items: &[String]) -> Result<(), Failure> {
    write_buffered(|out| {
        serde_json::to_writer(&mut *out, items)
            .map_err(std::io::Error::other)
            .and_then(|()| writeln!(out))
    })
}

fn write_buffered(
    write: impl FnOnce(&mut BufWriter<StdoutLock<'static>>) -> std::io::Result<()>,
) -> Result<(), Failure> {
    let mut out = BufWriter::new(std::io::stdout().lock());
    write(&mut out)
        .and_then(|()| out.flush())
        .map_err(|error| Failure::runtime(format!("writing the IDs: {error}")))
}

/// One of the service's bodies as a line of JSON. They are plain data: nothing in them
/// can fail to serialise.
pub fn json_text(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).unwrap_or_default()
}
