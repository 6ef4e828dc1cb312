//! One download of a new episode per researcher process: jobs of an episode that has no
//! pinned rendition yet wait for each other, so the first downloads and pins it and
//! the rest read it from the media store. Without this, a researcher running several
//! jobs of a new episode at once downloaded it once per job (outside try 23d F1: 6
//! downloads for 4 episodes, a 132 MB body twice in one second; with a host that
//! varies its audio, one episode's clips were split over two renditions). Researchers
//! on other machines still may download at once; the pin settles that (docs/researcher.md).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The episodes whose first download one of this process's jobs is making.
#[derive(Debug, Default)]
pub(crate) struct FirstFetch {
    episodes: Arc<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>>,
}

/// Held while a job fetches and pins an episode; the next job of the episode goes on
/// when it is dropped.
#[derive(Debug)]
pub(crate) struct Fetching {
    episode: String,
    episodes: Arc<Mutex<HashMap<String, Arc<AsyncMutex<()>>>>>,
    guard: Option<OwnedMutexGuard<()>>,
}

impl FirstFetch {
    /// Waits until no other job of this process is fetching `episode`, then holds it.
    pub(crate) async fn hold(&self, episode: &str) -> Fetching {
        let lock = match self.episodes.lock() {
            Ok(mut map) => map.entry(episode.to_string()).or_default().clone(),
            // A poisoned map: no waiting (a second download, as before).
            Err(_) => Arc::new(AsyncMutex::new(())),
        };
        let guard = lock.lock_owned().await;
        Fetching {
            episode: episode.to_string(),
            episodes: self.episodes.clone(),
            guard: Some(guard),
        }
    }

    /// Episodes being fetched or waited for now (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.episodes.lock().map_or(0, |m| m.len())
    }
}

impl Drop for Fetching {
    fn drop(&mut self) {
        drop(self.guard.take());
        if let Ok(mut map) = self.episodes.lock() {
            // The map's own reference alone: no job holds or waits for the episode.
            if map
                .get(&self.episode)
                .is_some_and(|l| Arc::strong_count(l) == 1)
            {
                map.remove(&self.episode);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_job_of_an_episode_waits_for_the_first_and_others_do_not() {
        let fetch = Arc::new(FirstFetch::default());
        let first = fetch.hold("e1").await;
        let other = tokio::time::timeout(Duration::from_millis(200), fetch.hold("e2")).await;
        assert!(other.is_ok(), "another episode does not wait");
        drop(other);
        let waiting = {
            let fetch = fetch.clone();
            tokio::spawn(async move { fetch.hold("e1").await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiting.is_finished(), "the second job of e1 waits");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("goes on once the first is done")
            .expect("task");
        drop(second);
        assert_eq!(fetch.len(), 0, "nothing left behind");
    }
}
