//! The node's background jobs, supervised: the change listener, housekeeping,
//! the database probe, the receipt tree head and the node heartbeat each run
//! as a task of one [`tokio::task::JoinSet`], owned by one supervisor task.
//!
//! A job is meant to run for as long as the node does. One that ends — by
//! returning, or by a panic that tokio caught — is reported (a log line with
//! the job's name and `pactd_background_job_restarts_total{task, how}`), its
//! `on_stop` runs, and it is started again after a back-off
//! ([`next_delay`]): a job that keeps failing at once cannot spin a core, and
//! one that ran a while is back within a quarter of a second.
//!
//! `on_stop` matters most for the listener. Its own loop empties the memory
//! views when a connection ends; a panic skips that code, so the supervisor
//! does it instead (the memory views closed, the feed lost). Even without
//! it, no view answers past the feed's bound (`feed.rs` checks the last
//! heartbeat at each use), so a node whose listener died stops answering from
//! memory within that bound — `on_stop` makes it immediate.
//!
//! Stopping the node aborts the supervisor; dropping its `JoinSet` aborts
//! every job with it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::task::{Id, JoinSet};
use tokio::time::Instant;

/// The first back-off, and the one after a job that ran for a while.
pub const FIRST_DELAY: Duration = Duration::from_millis(250);
/// The longest back-off between two starts of a job that keeps failing.
pub const MAX_DELAY: Duration = Duration::from_secs(30);
/// A job that ran at least this long before it ended was working: its next
/// start is after [`FIRST_DELAY`] again.
pub const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// The wait before starting a job again, given the last wait and how long the
/// job ran: doubled while it fails quickly (up to [`MAX_DELAY`]), back to
/// [`FIRST_DELAY`] after a run of [`HEALTHY_RUN`] or more.
pub fn next_delay(last: Duration, ran_for: Duration) -> Duration {
    if ran_for >= HEALTHY_RUN {
        FIRST_DELAY
    } else {
        (last * 2).clamp(FIRST_DELAY, MAX_DELAY)
    }
}

type Run<S> = fn(S) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// One background job: how to start it, and what to undo when it stops.
pub struct Job<S> {
    pub name: &'static str,
    pub run: Run<S>,
    /// Runs on the supervisor after the job ended, before its restart.
    pub on_stop: fn(&S),
}

impl<S> Job<S> {
    /// A job with nothing to undo when it stops.
    pub fn new(name: &'static str, run: Run<S>) -> Self {
        Self {
            name,
            run,
            on_stop: |_| {},
        }
    }
}

impl<S> Clone for Job<S> {
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            run: self.run,
            on_stop: self.on_stop,
        }
    }
}

/// What the supervisor knows of one job between its starts.
struct Running {
    job: usize,
    started: Instant,
    /// The wait that preceded this start.
    delay: Duration,
}

/// Runs `jobs` with `context` until the returned future is dropped, starting
/// each again when it ends. Returns only when `jobs` is empty.
pub async fn supervise<S: Clone + Send + 'static>(context: S, jobs: Vec<Job<S>>) {
    let mut set = JoinSet::new();
    let mut running: HashMap<Id, Running> = HashMap::new();
    for (i, job) in jobs.iter().enumerate() {
        let id = start(&mut set, &context, job, Duration::ZERO);
        running.insert(
            id,
            Running {
                job: i,
                started: Instant::now(),
                delay: Duration::ZERO,
            },
        );
    }
    while let Some(ended) = set.join_next_with_id().await {
        let (id, how) = match ended {
            Ok((id, ())) => (id, "returned"),
            Err(e) if e.is_panic() => (e.id(), "panicked"),
            // Cancelled: only an abort does that, and nobody aborts a job but
            // the supervisor's own drop. Nothing to restart.
            Err(e) => {
                running.remove(&e.id());
                continue;
            }
        };
        let Some(was) = running.remove(&id) else {
            continue;
        };
        let Some(job) = jobs.get(was.job) else {
            continue;
        };
        // The back-off counts from when the job really started (after its
        // own wait), so a job failing at once doubles its wait each time.
        let ran_for = was.started.elapsed().saturating_sub(was.delay);
        let delay = next_delay(was.delay, ran_for);
        // `task`, not `job`: Prometheus keeps `job` for the scrape job.
        metrics::counter!("pactd_background_job_restarts_total", "task" => job.name, "how" => how)
            .increment(1);
        tracing::error!(
            job = job.name,
            how,
            ran_ms = u64::try_from(ran_for.as_millis()).unwrap_or(u64::MAX),
            restart_in_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "background job stopped; starting it again"
        );
        (job.on_stop)(&context);
        let id = start(&mut set, &context, job, delay);
        running.insert(
            id,
            Running {
                job: was.job,
                started: Instant::now(),
                delay,
            },
        );
    }
}

fn start<S: Clone + Send + 'static>(
    set: &mut JoinSet<()>,
    context: &S,
    job: &Job<S>,
    after: Duration,
) -> Id {
    let run = (job.run)(context.clone());
    set.spawn(async move {
        if !after.is_zero() {
            tokio::time::sleep(after).await;
        }
        run.await;
    })
    .id()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_job_that_fails_at_once_waits_longer_each_time_up_to_the_cap() {
        let mut d = Duration::ZERO;
        let mut waits = Vec::new();
        for _ in 0..10 {
            d = next_delay(d, Duration::ZERO);
            waits.push(d);
        }
        assert_eq!(waits[0], FIRST_DELAY);
        assert_eq!(waits[1], FIRST_DELAY * 2);
        assert!(waits.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(waits[9], MAX_DELAY);
    }

    #[test]
    fn a_job_that_ran_a_while_is_started_again_soon() {
        assert_eq!(next_delay(MAX_DELAY, HEALTHY_RUN), FIRST_DELAY);
        assert_eq!(
            next_delay(MAX_DELAY, HEALTHY_RUN - Duration::from_secs(1)),
            MAX_DELAY
        );
    }

    #[derive(Clone, Default)]
    struct Counts {
        starts: Arc<AtomicUsize>,
        stops: Arc<AtomicUsize>,
        steady: Arc<AtomicUsize>,
    }

    fn panics_twice(c: Counts) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            let n = c.starts.fetch_add(1, Ordering::SeqCst);
            if n < 2 {
                panic!("job failure {n} (expected by the test)");
            }
            std::future::pending::<()>().await;
        })
    }

    fn runs_for_ever(c: Counts) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            c.steady.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<()>().await;
        })
    }

    fn count_stop(c: &Counts) {
        c.stops.fetch_add(1, Ordering::SeqCst);
    }

    /// Waits (real time, bounded) until `n` starts were counted.
    async fn until_started(c: &Counts, n: usize) {
        let waited = tokio::time::timeout(Duration::from_secs(20), async {
            while c.starts.load(Ordering::SeqCst) < n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "{n} starts expected");
    }

    #[tokio::test]
    async fn a_panicking_job_is_stopped_cleanly_and_started_again_while_others_keep_running() {
        let counts = Counts::default();
        let jobs = vec![
            Job {
                name: "flaky",
                run: panics_twice,
                on_stop: count_stop,
            },
            Job {
                name: "steady",
                run: runs_for_ever,
                on_stop: count_stop,
            },
        ];
        let supervisor = tokio::spawn(supervise(counts.clone(), jobs));
        until_started(&counts, 3).await;
        assert_eq!(counts.stops.load(Ordering::SeqCst), 2, "on_stop per end");
        assert_eq!(counts.steady.load(Ordering::SeqCst), 1, "never restarted");
        assert!(!supervisor.is_finished());
        supervisor.abort();
        assert!(supervisor.await.is_err_and(|e| e.is_cancelled()));
    }

    fn returns(c: Counts) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            c.starts.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[tokio::test]
    async fn a_job_that_keeps_ending_is_not_restarted_in_a_busy_loop() {
        let counts = Counts::default();
        let jobs = vec![Job {
            name: "ends",
            run: returns,
            on_stop: count_stop,
        }];
        let began = Instant::now();
        let supervisor = tokio::spawn(supervise(counts.clone(), jobs));
        // The 4th start comes after waits of 0.25, 0.5 and 1 s: never sooner.
        until_started(&counts, 4).await;
        assert!(began.elapsed() >= FIRST_DELAY * 7);
        supervisor.abort();
    }
}
