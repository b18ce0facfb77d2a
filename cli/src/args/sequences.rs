//! The flags that declare which sequences are served (`serve`, `idgen seq next`), and the
//! declared set they make.

use std::collections::BTreeSet;
use std::path::PathBuf;

use clap::Args;
use idgen::blocks::SequenceName;

use crate::failure::Failure;
use crate::operator_files;

/// Which sequences are served: the ones an operator declared, and with
/// `--create-sequences` any valid name.
#[derive(Args, Clone)]
pub struct DeclaredArgs {
    /// The sequences served, comma-separated (`orders,invoices`); a request for another
    /// name is a 404 that says how to declare it. `idgen seq next` takes these too.
    #[arg(
        long,
        value_name = "NAME,...",
        value_delimiter = ',',
        env = "IDGEN_SEQUENCES"
    )]
    sequences: Vec<String>,
    /// A file declaring sequences: one name per line; blank lines and lines starting with
    /// `#` are skipped.
    #[arg(long, value_name = "FILE", env = "IDGEN_SEQUENCES_FILE")]
    sequences_file: Option<PathBuf>,
    /// Serve any valid name, creating its sequence on first use (a thread of the service
    /// and a record in the store for each, up to --max-sequences): only where every client
    /// is trusted, since any client can then make new sequences.
    #[arg(long, env = "IDGEN_CREATE_SEQUENCES")]
    create_sequences: bool,
}

/// The largest sequences file read.
const MAX_SEQUENCES_FILE_BYTES: u64 = 1 << 20;

/// The sequences served.
pub struct Declared {
    names: BTreeSet<SequenceName>,
    create: bool,
}

impl DeclaredArgs {
    /// The declared names, each checked; a bad one is bad input, named with its line.
    pub fn declared(&self) -> Result<Declared, Failure> {
        let mut names = BTreeSet::new();
        // Spaces around a name and empty items (`a, b`, a trailing comma, an empty
        // IDGEN_SEQUENCES) are not names.
        let listed = self.sequences.iter().map(|name| name.trim());
        for name in listed.filter(|name| !name.is_empty()) {
            names.insert(
                SequenceName::new(name)
                    .map_err(|error| Failure::input(format!("--sequences: {error}")))?,
            );
        }
        if let Some(path) = &self.sequences_file {
            let flag = "--sequences-file";
            let file =
                operator_files::read(path, flag, "a list of sequences", MAX_SEQUENCES_FILE_BYTES)?;
            // A byte-order mark (an editor's) is not part of the first name.
            let text = file.text.strip_prefix('\u{feff}').unwrap_or(&file.text);
            for (number, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                names.insert(SequenceName::new(line).map_err(|error| {
                    Failure::input(format!(
                        "{flag} {} line {}: {error}",
                        path.display(),
                        number + 1
                    ))
                })?);
            }
        }
        Ok(Declared {
            names,
            create: self.create_sequences,
        })
    }
}

impl Declared {
    /// Whether `name` is served.
    pub fn allows(&self, name: &SequenceName) -> bool {
        self.create || self.names.contains(name)
    }

    /// Why `name` is not served, and how to serve it.
    pub fn refusal(&self, name: &SequenceName) -> String {
        format!(
            "sequence {name} is not declared: only declared sequences are served; declare it \
             with --sequences NAME,... or a line of --sequences-file FILE (or start the \
             service with --create-sequences to create any name on first use)"
        )
    }

    /// The names a request may use, for the document's enum: `None` when any name is (with
    /// `--create-sequences`), or when none is declared (every request is then a 404).
    pub fn enumerated(&self) -> Option<Vec<&str>> {
        (!self.create && !self.names.is_empty())
            .then(|| self.names.iter().map(SequenceName::as_str).collect())
    }

    /// How many sequences at most: the declared ones, or, with `--create-sequences`, any.
    pub fn count(&self) -> Option<usize> {
        (!self.create).then_some(self.names.len())
    }
}
