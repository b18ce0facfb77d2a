//! The store-wide files: the layout the store serves (`layout.idgen`, written once) and the
//! longest outage horizon any holder used (`horizon.idgen`, only ever raised).

use std::fs;
use std::io::Write;

use super::roster::canonical;
use super::{FileStore, HORIZON, LAYOUT, MAX_SMALL_FILE_BYTES, io_error, not_a_plain_file};
use crate::Error;
use crate::store_files::private_file;

impl FileStore {
    /// The layout file's text, `None` when there is none; a file that is not a plain
    /// one, or that others may write, or too long for a layout record, is an error.
    pub(super) fn read_layout(&self) -> Result<Option<String>, Error> {
        let path = self.dir.join(LAYOUT);
        match fs::symlink_metadata(&path) {
            Ok(metadata) if !metadata.file_type().is_file() => Err(not_a_plain_file(&path)),
            Ok(metadata) if metadata.len() > MAX_SMALL_FILE_BYTES => Err(Error::LeaseStore {
                reason: format!("{} is not an idgen layout record", path.display()),
            }),
            Ok(metadata) => {
                self.check_writers(&path, &metadata)?;
                let text = fs::read(&path).map_err(|error| io_error(&path, "read", &error))?;
                Ok(Some(String::from_utf8_lossy(&text).into_owned()))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&path, "read", &error)),
        }
    }

    /// Writes `record` as the layout file unless one exists: written whole in a file of its
    /// own, then linked into place, which fails if another process linked first.
    pub(super) fn record_layout(&self, record: &str) -> Result<bool, Error> {
        let path = self.dir.join(LAYOUT);
        let thread = format!("{:?}", std::thread::current().id());
        let staging = self.dir.join(format!(
            ".{LAYOUT}.writing-{}-{}",
            std::process::id(),
            thread.trim_start_matches("ThreadId(").trim_end_matches(')')
        ));
        let _ = fs::remove_file(&staging);
        let written = private_file(&staging)
            .map_err(|error| io_error(&staging, "create", &error))
            .and_then(|mut file| {
                self.make_private(&staging, &file)?;
                file.write_all(format!("{record}\n").as_bytes())
                    .and_then(|()| file.sync_all())
                    .map_err(|error| io_error(&staging, "write", &error))
            });
        let linked = written.and_then(|()| match fs::hard_link(&staging, &path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(error) => Err(io_error(&path, "create", &error)),
        });
        let _ = fs::remove_file(&staging);
        linked
    }

    /// The largest outage horizon recorded, in milliseconds; `None` when there is none. A
    /// damaged record (too long, not text, not a number) counts as none: the holder's own
    /// horizon still applies, and is written over it.
    pub(super) fn read_horizon(&self) -> Result<Option<u64>, Error> {
        let path = self.dir.join(HORIZON);
        match fs::symlink_metadata(&path) {
            Ok(metadata) if !metadata.file_type().is_file() => Err(not_a_plain_file(&path)),
            Ok(metadata) => {
                self.check_writers(&path, &metadata)?;
                let text = (metadata.len() <= MAX_SMALL_FILE_BYTES)
                    .then(|| fs::read(&path))
                    .transpose()
                    .map_err(|error| io_error(&path, "read", &error))?
                    .and_then(|bytes| String::from_utf8(bytes).ok());
                Ok(text
                    .as_deref()
                    .and_then(|text| text.strip_suffix('\n'))
                    .and_then(canonical))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io_error(&path, "read", &error)),
        }
    }

    /// Replaces the horizon file with `horizon_ms`: written whole aside, then renamed over.
    pub(super) fn write_horizon(&self, horizon_ms: u64) -> Result<(), Error> {
        let path = self.dir.join(HORIZON);
        let staging = self
            .dir
            .join(format!(".{HORIZON}.writing-{}", std::process::id()));
        let _ = fs::remove_file(&staging);
        let mut file =
            private_file(&staging).map_err(|error| io_error(&staging, "create", &error))?;
        self.make_private(&staging, &file)?;
        file.write_all(format!("{horizon_ms}\n").as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|error| io_error(&staging, "write", &error))?;
        fs::rename(&staging, &path).map_err(|error| io_error(&path, "replace", &error))
    }
}
