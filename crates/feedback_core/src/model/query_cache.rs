//! Bounded least-recently-used caches: query embeddings keyed by (model, text), cross-encoder scores keyed by
//! (model, query, passage).

use std::collections::HashMap;
use std::hash::Hash;

pub struct Cache<K, V> {
    capacity: usize,
    tick: u64,
    entries: HashMap<K, (u64, V)>,
    hits: u64,
    misses: u64,
}

/// Query embeddings by (model, text).
pub type QueryCache = Cache<(String, String), Vec<f32>>;
/// Cross-encoder scores by (model, query, passage).
pub type ScoreCache = Cache<(String, String, String), f32>;

impl<K: Hash + Eq + Clone, V: Clone> Cache<K, V> {
    pub fn new(capacity: usize) -> Self {
        Cache { capacity, tick: 0, entries: HashMap::new(), hits: 0, misses: 0 }
    }

    /// The cached value (a hit), or None (a miss).
    pub fn get(&mut self, key: &K) -> Option<V> {
        self.tick += 1;
        match self.entries.get_mut(key) {
            Some((used, v)) => {
                *used = self.tick;
                self.hits += 1;
                Some(v.clone())
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Caches `value` under `key`, evicting the least recently used entry when full. Capacity 0: nothing kept.
    pub fn insert(&mut self, key: K, value: V) {
        self.tick += 1;
        if self.capacity > 0 {
            self.shrink_to(self.capacity - 1);
            self.entries.insert(key, (self.tick, value));
        }
    }

    /// The cached value, or `compute()`'s (then cached). A capacity of 0 disables caching.
    pub fn get_or_insert<E>(&mut self, key: K, compute: impl FnOnce() -> Result<V, E>) -> Result<V, E> {
        if let Some(v) = self.get(&key) {
            return Ok(v);
        }
        let v = compute()?;
        self.insert(key, v.clone());
        Ok(v)
    }

    /// Shrinks (or grows) the bound; evicts least recently used entries as needed.
    pub fn set_capacity(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.shrink_to(capacity);
    }

    /// Evicts least recently used entries until at most `max` remain (O(n) per eviction; n is small).
    fn shrink_to(&mut self, max: usize) {
        while self.entries.len() > max {
            let Some(oldest) = self.entries.iter().min_by_key(|(_, (used, _))| *used).map(|(k, _)| k.clone()) else {
                break;
            };
            self.entries.remove(&oldest);
        }
    }

    /// (entries, hits, misses)
    pub fn stats(&self) -> (usize, u64, u64) {
        (self.entries.len(), self.hits, self.misses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(model: &str, text: &str) -> (String, String) {
        (model.to_string(), text.to_string())
    }

    fn get(c: &mut QueryCache, model: &str, text: &str, value: f32) -> Vec<f32> {
        c.get_or_insert::<()>(key(model, text), || Ok(vec![value])).unwrap()
    }

    #[test]
    fn hits_do_not_recompute_and_model_is_part_of_the_key() {
        let mut c = QueryCache::new(4);
        assert_eq!(get(&mut c, "m", "q", 1.0), vec![1.0]);
        assert_eq!(c.get_or_insert::<()>(key("m", "q"), || panic!("cached")).unwrap(), vec![1.0]);
        assert_eq!(get(&mut c, "other", "q", 2.0), vec![2.0]);
        assert_eq!(c.stats(), (2, 1, 2));
    }

    #[test]
    fn bounded_and_evicts_least_recently_used() {
        let mut c = QueryCache::new(2);
        get(&mut c, "m", "a", 1.0);
        get(&mut c, "m", "b", 2.0);
        get(&mut c, "m", "a", 9.0); // hit: a is now most recent
        get(&mut c, "m", "c", 3.0); // evicts b
        assert_eq!(c.stats().0, 2);
        assert_eq!(get(&mut c, "m", "a", 9.0), vec![1.0]);
        assert_eq!(get(&mut c, "m", "b", 5.0), vec![5.0]);
        c.set_capacity(1);
        assert_eq!(c.stats().0, 1);
    }

    #[test]
    fn errors_are_not_cached_and_zero_capacity_disables() {
        let mut c = QueryCache::new(0);
        assert!(c.get_or_insert(key("m", "q"), || Err("boom")).is_err());
        get(&mut c, "m", "q", 1.0);
        assert_eq!(c.stats().0, 0);
    }

    #[test]
    fn scores_are_cached_per_model_query_and_passage() {
        let mut c = ScoreCache::new(2);
        let k = |m: &str, q: &str, p: &str| (m.to_string(), q.to_string(), p.to_string());
        assert_eq!(c.get(&k("m", "q", "p")), None);
        c.insert(k("m", "q", "p"), 1.5);
        assert_eq!(c.get(&k("m", "q", "p")), Some(1.5));
        assert_eq!(c.get(&k("m2", "q", "p")), None);
        assert_eq!(c.get(&k("m", "q", "p2")), None);
        c.insert(k("m", "q", "a"), 2.0);
        c.insert(k("m", "q", "b"), 3.0); // evicts the least recently used (m, q, p)
        assert_eq!(c.get(&k("m", "q", "p")), None);
        assert_eq!(c.stats(), (2, 1, 4));
    }
}
