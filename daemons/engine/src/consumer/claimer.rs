//! The long-running consumer's claims: from a live queue view, spread over the head of
//! the queue and the consumer group's shares, widened under contention ([`Claimer`]).

use super::*;

/// Claims jobs of one state's queue for a long-running consumer, from a live
/// [`QueueView`] instead of a listing per claim. Each claim picks at random among the
/// first `spread` claimable entries (so consumers do not all race for the head of the
/// queue); an entry whose lock another worker holds is passed over for `busy_for` or
/// until it leaves the queue. The lock-and-re-check rule is the same as [`claim_next`]'s.
#[derive(Debug)]
pub struct Claimer {
    state: JobState,
    owner: String,
    view: QueueView,
    busy: HashMap<String, Instant>,
    busy_for: Duration,
    spread: usize,
    contention: usize,
    group: Option<ConsumerGroup>,
    stats: Option<Arc<ClaimStats>>,
    unreadable: Unreadable,
}

/// Counts of claim attempts by outcome, shared with whoever wants them (a benchmark, a
/// test); the same counts go to the `archivist_claim_attempts_total` metric.
#[derive(Debug, Default)]
pub struct ClaimStats {
    claimed: AtomicU64,
    busy: AtomicU64,
    moved: AtomicU64,
    failed: AtomicU64,
}

impl ClaimStats {
    fn count(&self, outcome: &str) {
        let counter = match outcome {
            "claimed" => &self.claimed,
            "busy" => &self.busy,
            "moved" => &self.moved,
            _ => &self.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Jobs locked and re-checked.
    pub fn claimed(&self) -> u64 {
        self.claimed.load(Ordering::Relaxed)
    }

    /// Lock attempts lost to another worker (each one a wasted write on the server).
    pub fn busy(&self) -> u64 {
        self.busy.load(Ordering::Relaxed)
    }

    /// Entries whose job had moved on by the time it was locked.
    pub fn moved(&self) -> u64 {
        self.moved.load(Ordering::Relaxed)
    }

    /// Attempts that failed with an error.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

/// The most a [`Claimer`] widens its window under contention (entries beyond `spread`).
pub const MAX_CONTENTION_WINDOW: usize = 256;

impl Claimer {
    /// A claimer of `state`'s queue for `owner`.
    pub fn new(
        state: JobState,
        owner: impl Into<String>,
        busy_for: Duration,
        spread: usize,
    ) -> Claimer {
        Claimer {
            state,
            owner: owner.into(),
            view: QueueView::new(state),
            busy: HashMap::new(),
            busy_for,
            spread: spread.max(1),
            contention: 0,
            group: None,
            stats: None,
            unreadable: Unreadable::default(),
        }
    }

    /// Counts this claimer's attempts into `stats` as well.
    pub fn with_stats(mut self, stats: Arc<ClaimStats>) -> Self {
        self.stats = Some(stats);
        self
    }

    /// Joins the state's consumers (`/consumers/{state}`) so this claimer looks first in
    /// its own share of the queue's head ([`crate::group`]). Without it (or if joining
    /// fails: logged, not fatal) it claims from the whole head.
    pub async fn join_group(&mut self, session: &Session, slots: usize) {
        match ConsumerGroup::join(session, self.state, &self.owner, slots).await {
            Ok(group) => self.group = Some(group),
            Err(e) => {
                tracing::warn!(error = %e, state = %self.state, "could not join the consumers; claiming from the whole queue")
            }
        }
    }

    /// Claims a job, skipping the jobs in `skip` (those this worker already holds);
    /// `None` if no entry of the view could be claimed.
    pub async fn claim(
        &mut self,
        session: &Session,
        skip: &HashSet<String>,
        shutdown: &CancellationToken,
    ) -> Result<Option<Claimed>> {
        Ok(self.claim_many(session, 1, skip, shutdown).await?.pop())
    }

    /// Claims up to `want` jobs at once, skipping the jobs in `skip`: the lock-and-re-read
    /// requests of all candidates are sent together (pipelined on the session), so a
    /// consumer with several free slots fills them in one round trip instead of one per
    /// job. Candidates are `want` distinct entries drawn at random from the first
    /// `want + spread - 1` claimable ones, widened while other workers' locks are met
    /// (up to [`MAX_CONTENTION_WINDOW`] more). Returns as soon as a round claims something,
    /// or empty when no entry of the view could be claimed.
    pub async fn claim_many(
        &mut self,
        session: &Session,
        want: usize,
        skip: &HashSet<String>,
        shutdown: &CancellationToken,
    ) -> Result<Vec<Claimed>> {
        let want = want.max(1);
        self.view.sync(session).await?;
        let share = match self.group.as_mut() {
            Some(group) => group.share(session).await,
            None => Share::WHOLE,
        };
        let now = Instant::now();
        self.busy.retain(|_, until| *until > now);
        loop {
            let window: Vec<QueueEntry> = self
                .view
                .entries()
                .filter(|e| !skip.contains(&e.job) && !self.busy.contains_key(&e.job))
                .take((want + self.spread - 1) * share.count + self.contention)
                .cloned()
                .collect();
            if window.is_empty() {
                return Ok(Vec::new());
            }
            let picks = pick_candidates(window, want, self.spread, share, &mut rand::thread_rng());
            // Each attempt sends its requests when first polled; `join_all` polls them
            // all before awaiting any, so they travel together.
            let attempts = futures_util::future::join_all(
                picks
                    .iter()
                    .map(|entry| try_claim(session, self.state, entry, &self.owner, shutdown)),
            )
            .await;
            let mut claimed = Vec::new();
            let mut first_error = None;
            let mut busy = 0;
            for (entry, attempt) in picks.iter().zip(attempts) {
                let outcome = match &attempt {
                    Ok(Attempt::Claimed(_)) => "claimed",
                    Ok(Attempt::Busy) => "busy",
                    Ok(Attempt::Moved | Attempt::Unreadable { .. }) => "moved",
                    Err(_) => "error",
                };
                metrics::counter!("archivist_claim_attempts_total", "state" => self.state.as_str(), "outcome" => outcome)
                    .increment(1);
                if let Some(stats) = &self.stats {
                    stats.count(outcome);
                }
                match attempt {
                    Ok(Attempt::Claimed(c)) => claimed.push(*c),
                    Ok(Attempt::Busy) => {
                        busy += 1;
                        self.busy.insert(entry.job.clone(), now + self.busy_for);
                    }
                    Ok(Attempt::Moved) => self.view.remove(entry),
                    Ok(Attempt::Unreadable { version, error }) => {
                        self.unreadable
                            .report(self.state, &entry.job, version, &error);
                        self.view.remove(entry);
                    }
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            self.contention = next_contention(self.contention, busy);
            if let Some(err) = first_error {
                if claimed.is_empty() {
                    return Err(err);
                }
                // The claims that succeeded are ours and must be run (or they would sit
                // locked until the session ends); the error shows again on the next
                // claim if it persists.
                tracing::warn!(error = %err, state = %self.state, "one of several claims failed");
            }
            if !claimed.is_empty() {
                return Ok(claimed);
            }
            // Take in what changed meanwhile (no listing unless the view went stale).
            self.view.sync(session).await?;
        }
    }

    /// Waits until the queue changes. Select it with a poll timer and the session's
    /// `lost` token: it never returns once the session has ended.
    pub async fn changed(&mut self) {
        self.view.changed().await
    }

    /// Does the view hold no entry (an empty queue, or a missing one)?
    pub fn is_empty(&self) -> bool {
        self.view.is_empty()
    }

    /// Forgets the view and the busy entries: the next claim lists the queue again.
    pub fn invalidate(&mut self) {
        self.view.invalidate();
        self.busy.clear();
    }
}

/// How far beyond `spread` the next claim looks, after a round that found `busy` entries
/// locked by other workers: contention doubles the extra width (plus what was seen), a
/// clean round shrinks it by an eighth. Other consumers' jobs sit at the head of the queue
/// until their first transition; a window wider than the head lets consumers claim apart
/// instead of failing lock after lock (each failed lock is a wasted write).
fn next_contention(current: usize, busy: usize) -> usize {
    if busy > 0 {
        (current * 2 + busy).min(MAX_CONTENTION_WINDOW)
    } else {
        current - current / 8
    }
}

/// Up to `want` entries of `window` (claimable entries in queue order) to try: first this
/// consumer's own share, `want` drawn at random from the first `want + spread - 1` of
/// those; then, if its share runs short, others' entries at random (work is never left for
/// an owner that is busy or gone). Returned in queue order.
fn pick_candidates(
    window: Vec<QueueEntry>,
    want: usize,
    spread: usize,
    share: Share,
    rng: &mut impl Rng,
) -> Vec<QueueEntry> {
    let (mine, others): (Vec<usize>, Vec<usize>) =
        (0..window.len()).partition(|&i| share.owns(&window[i].job));
    let mut chosen = sample(&mine[..mine.len().min(want + spread - 1)], want, rng);
    if chosen.len() < want {
        chosen.extend(sample(&others, want - chosen.len(), rng));
    }
    chosen.sort_unstable();
    let mut window: Vec<Option<QueueEntry>> = window.into_iter().map(Some).collect();
    chosen
        .into_iter()
        .filter_map(|i| window[i].take())
        .collect()
}

/// `n` distinct items of `from` at random (all of them if there are no more).
fn sample(from: &[usize], n: usize, rng: &mut impl Rng) -> Vec<usize> {
    if from.len() <= n {
        return from.to_vec();
    }
    rand::seq::index::sample(rng, from.len(), n)
        .into_iter()
        .map(|i| from[i])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// `n` entries in queue order, as a view lists them.
    fn window(n: usize) -> Vec<QueueEntry> {
        let mut w: Vec<QueueEntry> = (0..n)
            .map(|i| QueueEntry::new(0, 1_700_000_000_000 + i as i64, format!("j{i:010}")))
            .collect();
        w.sort_by_key(QueueEntry::name);
        w
    }

    #[test]
    fn consumers_of_a_group_pick_disjoint_entries_when_their_shares_suffice() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let count = 4;
        let mut seen = HashSet::new();
        for rank in 0..count {
            let share = Share { rank, count };
            let picks = pick_candidates(window(64), 5, 4, share, &mut rng);
            assert_eq!(picks.len(), 5);
            for p in picks {
                assert!(share.owns(&p.job), "{} is not in share {rank}", p.job);
                assert!(seen.insert(p.job.clone()), "{} picked twice", p.job);
            }
        }
    }

    #[test]
    fn a_short_share_is_filled_from_other_entries_and_order_is_kept() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let share = Share { rank: 0, count: 3 };
        let w = window(6);
        let own = w.iter().filter(|e| share.owns(&e.job)).count();
        assert!(own < 6);
        let picks = pick_candidates(w.clone(), 6, 1, share, &mut rng);
        assert_eq!(picks.len(), 6, "work is not left waiting for its owner");
        let names: Vec<String> = picks.iter().map(QueueEntry::name).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "candidates come back in queue order");
    }

    #[test]
    fn a_lone_consumer_picks_among_the_first_spread_entries() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let w = window(40);
        for _ in 0..50 {
            let picks = pick_candidates(w.clone(), 2, 4, Share::WHOLE, &mut rng);
            assert_eq!(picks.len(), 2);
            for p in picks {
                let i = w.iter().position(|e| *e == p).unwrap();
                assert!(i < 5, "picked entry {i}, beyond want + spread - 1");
            }
        }
    }

    #[test]
    fn contention_widens_the_window_and_calm_narrows_it() {
        let mut c = 0;
        c = next_contention(c, 3);
        assert_eq!(c, 3);
        c = next_contention(c, 2);
        assert_eq!(c, 8);
        for _ in 0..100 {
            c = next_contention(c, 50);
        }
        assert_eq!(c, MAX_CONTENTION_WINDOW);
        for _ in 0..100 {
            c = next_contention(c, 0);
        }
        assert!(c < 8, "{c}");
    }
}
