//! The default clock's one upkeep thread per process: shared, parked when idle, woken on
//! demand. A test binary of its own, so no other test keeps the thread busy.

use std::time::{Duration, Instant};

use idgen::{Clock, DEFAULT_CLOCK_IDLE, DefaultClock, Generator};

#[test]
fn default_clocks_share_one_thread_that_parks_when_idle_and_wakes_on_demand() {
    let clock = DefaultClock::new();
    let generator = Generator::builder().build().unwrap();
    let first = generator.next_id().unwrap();
    // Both refresh through one thread: its count moves for both.
    let before = clock.recent_unix_ms();
    assert!(before <= clock.now_unix_ms());
    // Asked for nothing for longer than the idle period: the thread stops refreshing. Idle
    // wall time is the point here, so the test sleeps; then it waits, bounded, for a whole
    // window of 3 idle periods without a refresh (a thread that noticed late, under load,
    // may still refresh at the start of a window).
    std::thread::sleep(DEFAULT_CLOCK_IDLE * 3);
    let deadline = Instant::now() + Duration::from_secs(30);
    let parked = loop {
        let parked = clock.refreshes();
        std::thread::sleep(DEFAULT_CLOCK_IDLE * 3);
        if clock.refreshes() == parked {
            break parked;
        }
        assert!(
            Instant::now() < deadline,
            "still refreshing while idle: {} refreshes in the last {:?}",
            clock.refreshes() - parked,
            DEFAULT_CLOCK_IDLE * 3
        );
    };
    // The first call after that reads the precise clock, and wakes the thread.
    let next = generator.next_id().unwrap();
    assert!(next > first);
    let deadline = Instant::now() + Duration::from_secs(5);
    while clock.refreshes() == parked {
        assert!(Instant::now() < deadline, "never woke");
        std::thread::sleep(Duration::from_millis(1));
    }
    // While asked, the cached reading keeps up and never leads the precise one.
    let mut lags = Vec::new();
    // Samples spread over about 50 ms (the pause only spaces them).
    for _ in 0..200 {
        let recent = clock.recent_unix_ms();
        let precise = clock.now_unix_ms();
        assert!(
            recent <= precise,
            "recent {recent} ahead of precise {precise}"
        );
        lags.push(precise - recent);
        std::thread::sleep(Duration::from_micros(250));
    }
    lags.sort_unstable();
    assert!(
        lags[lags.len() / 2] <= 2,
        "median lag {} ms",
        lags[lags.len() / 2]
    );
    // The thread stops with the last default clock; a new one starts another.
    drop((clock, generator));
    let again = DefaultClock::new();
    assert!(
        again.refreshes() < parked,
        "the old thread's count: {}",
        again.refreshes()
    );
    assert!(again.recent_unix_ms() <= again.now_unix_ms());
}
