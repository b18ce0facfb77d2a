//! What the default clock's upkeep thread costs: the CPU time of an idle process that holds
//! a default generator (the thread parked), and of the upkeep thread while IDs are asked for
//! steadily, each over 10 s, as a share of one core. Linux: reads /proc.
//!
//! Run: `cargo bench --bench clock_cost`

use std::time::{Duration, Instant};

use idgen::Generator;

/// CPU seconds (user + system) from a /proc stat line.
fn cpu_seconds(stat: &str) -> f64 {
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0 // USER_HZ
}

fn process_cpu() -> f64 {
    cpu_seconds(&std::fs::read_to_string("/proc/self/stat").unwrap())
}

/// The CPU seconds of the thread named `name` in this process.
fn thread_cpu(name: &str) -> f64 {
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let dir = task.unwrap().path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            return cpu_seconds(&std::fs::read_to_string(dir.join("stat")).unwrap());
        }
    }
    panic!("no thread named {name}");
}

fn main() {
    const SPAN: Duration = Duration::from_secs(10);
    let generator = Generator::builder().build().unwrap();
    generator.next_id().unwrap();
    // Let the idle period pass, then measure a process that asks for nothing.
    std::thread::sleep(Duration::from_millis(300));
    let (start, cpu) = (Instant::now(), process_cpu());
    std::thread::sleep(SPAN);
    let idle = (process_cpu() - cpu) / start.elapsed().as_secs_f64();
    // Busy: one ID every millisecond from this thread; the upkeep thread's own CPU time.
    let (start, cpu) = (Instant::now(), thread_cpu("idgen-default-c"));
    let mut issued = 0u64;
    while start.elapsed() < SPAN {
        generator.next_id().unwrap();
        issued += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    let busy = (thread_cpu("idgen-default-c") - cpu) / start.elapsed().as_secs_f64();
    println!(
        "idle process (thread parked), 10 s: {:.2}% of one core",
        idle * 100.0
    );
    println!(
        "upkeep thread while IDs are asked for ({issued} IDs in 10 s): {:.2}% of one core",
        busy * 100.0
    );
}
