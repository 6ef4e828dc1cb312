//! Choosing one work item: the seed's episode and clip selection on the index.

use std::cmp::Reverse;

use super::Index;

/// One work item chosen by [`Index::pick`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick {
    /// Episode id.
    pub episode: String,
    /// Episode media URL.
    pub media_url: String,
    /// Episode priority (the job's queue priority).
    pub priority: i64,
    /// Episode initial curation, unix ms (the job's queue curation key).
    pub curated_ms: i64,
    /// Clip ids in selection order (priority descending, initial curation descending).
    pub clips: Vec<String>,
    /// The same clips' numbers.
    pub clip_numbers: Vec<u32>,
}

impl Index {
    fn sort_clips(&mut self) {
        if !self.clip_order_dirty {
            return;
        }
        self.clip_order_dirty = false;
        self.count_all();
        let mut order: Vec<(Reverse<i64>, Reverse<i64>, u32)> = self
            .clips
            .iter()
            .enumerate()
            .filter_map(|(n, c)| {
                let c = c.as_ref()?;
                let n = u32::try_from(n).ok()?;
                (!c.held).then_some((Reverse(c.priority), Reverse(c.curated_ms), n))
            })
            .collect();
        order.sort_unstable();
        self.clip_order = order.into_iter().map(|(_, _, n)| n).collect();
    }

    /// Chooses the next work item at ZooKeeper time `now_ms`, or `None` when nothing is
    /// left to plan.
    ///
    /// Episode: the first in (priority desc, initial curation desc) order that is not
    /// held and has an active clip neither researched for it nor blocked (by an active
    /// lease or a pending/held/failed job). Clips: that episode's free active clips in
    /// (priority desc, initial curation desc) order, at most `max_clips`. An expired
    /// lease counts as no lease.
    pub fn pick(&mut self, now_ms: i64, max_clips: usize) -> Option<Pick> {
        self.advance(now_ms);
        self.sort_clips();
        let slot = self.open.first()?.3;
        let entry = &self.episodes[slot];
        let info = entry.info.as_ref()?;
        let mut clips = Vec::new();
        let mut clip_numbers = Vec::new();
        for &n in &self.clip_order {
            if clips.len() >= max_clips {
                break;
            }
            if entry.researched.get(n) || entry.blocked.get(n) {
                continue;
            }
            if let Some(Some(clip)) = self.clips.get(n as usize) {
                clips.push(clip.id.clone());
                clip_numbers.push(n);
            }
        }
        if clips.is_empty() {
            return None;
        }
        Some(Pick {
            episode: entry.id.clone(),
            media_url: info.media_url.clone(),
            priority: info.priority,
            curated_ms: info.curated_ms,
            clips,
            clip_numbers,
        })
    }
}
