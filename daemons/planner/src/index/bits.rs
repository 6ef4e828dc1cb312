//! A growable bitset of clip numbers: 2,000 clips cost 250 bytes per episode, so the
//! 20M-pair index stays a few megabytes and "is any clip left?" is a few word operations.

/// A set of small numbers (clip numbers), one bit each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    /// An empty set.
    pub fn new() -> Bits {
        Bits::default()
    }

    /// Adds a number.
    pub fn set(&mut self, n: u32) {
        let (w, b) = split(n);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << b;
    }

    /// Removes a number.
    pub fn clear(&mut self, n: u32) {
        let (w, b) = split(n);
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << b);
        }
    }

    /// Is the number in the set?
    pub fn get(&self, n: u32) -> bool {
        let (w, b) = split(n);
        self.words.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    /// Empties the set, keeping its memory.
    pub fn clear_all(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
    }

    /// Number of members.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Bytes used by the words.
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }

    /// Is there a member of `self` in neither `a` nor `b`? (An active clip that is
    /// neither researched nor blocked.)
    pub fn any_outside(&self, a: &Bits, b: &Bits) -> bool {
        self.words.iter().enumerate().any(|(i, w)| {
            let taken = a.words.get(i).copied().unwrap_or(0) | b.words.get(i).copied().unwrap_or(0);
            w & !taken != 0
        })
    }

    /// How many members of `self` are in neither `a` nor `b`?
    pub fn count_outside(&self, a: &Bits, b: &Bits) -> u32 {
        self.words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let taken =
                    a.words.get(i).copied().unwrap_or(0) | b.words.get(i).copied().unwrap_or(0);
                (w & !taken).count_ones()
            })
            .sum()
    }

    /// How many members of `self` are also in `other`? (Active clips already researched.)
    pub fn count_both(&self, other: &Bits) -> u32 {
        self.words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| (a & b).count_ones())
            .sum()
    }

    /// Drops trailing empty words (after clips were removed).
    pub fn shrink(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
        self.words.shrink_to_fit();
    }
}

fn split(n: u32) -> (usize, u32) {
    ((n / 64) as usize, n % 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_clear_and_count() {
        let mut b = Bits::new();
        for n in [0, 1, 63, 64, 2000] {
            b.set(n);
        }
        assert!(b.get(63) && b.get(64) && b.get(2000) && !b.get(65) && !b.get(99_999));
        assert_eq!(b.count(), 5);
        b.clear(64);
        b.clear(99_999);
        assert!(!b.get(64));
        assert_eq!(b.count(), 4);
        b.clear_all();
        assert_eq!(b.count(), 0);
    }

    #[test]
    fn any_outside_sees_one_free_member_among_thousands() {
        let mut active = Bits::new();
        let mut researched = Bits::new();
        let blocked = Bits::new();
        for n in 1..=2000 {
            active.set(n);
            researched.set(n);
        }
        assert!(!active.any_outside(&researched, &blocked));
        researched.clear(1999);
        assert!(active.any_outside(&researched, &blocked));
        let mut blocked = blocked;
        blocked.set(1999);
        assert!(!active.any_outside(&researched, &blocked));
        assert_eq!(active.count_outside(&researched, &blocked), 0);
        researched.clear(5);
        assert_eq!(active.count_outside(&researched, &blocked), 1);
    }
}
