//! The files idgen keeps (a lease record, a lease roster, a block record), as a damaged or
//! hostile disk could leave them: reading never panics, and a record that reads is written
//! back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    idgen::fuzzing::read_store_files(bytes);
});
