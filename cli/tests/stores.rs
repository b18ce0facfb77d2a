//! The networked lease stores from the command line, in one test binary (each binary costs
//! a link): etcd's first run as the service manual writes it (`stores/etcd_first_run.rs`),
//! and PostgreSQL's flags end to end (`stores/postgres.rs`).

mod common;

/// A namespace no other test (or earlier run) uses.
fn namespace(test: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("/idgen-cli-test/{test}-{}-{nanos}", std::process::id())
}

#[cfg(feature = "etcd")]
#[path = "stores/etcd_first_run.rs"]
mod etcd_first_run;
#[path = "stores/postgres.rs"]
mod postgres;
