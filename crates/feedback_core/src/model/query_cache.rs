//! A bounded least-recently-used cache of query embeddings, keyed by (model, text).

use std::collections::HashMap;

pub struct QueryCache {
    capacity: usize,
    tick: u64,
    entries: HashMap<(String, String), (u64, Vec<f32>)>,
    hits: u64,
    misses: u64,
}

impl QueryCache {
    pub fn new(capacity: usize) -> Self {
        QueryCache { capacity, tick: 0, entries: HashMap::new(), hits: 0, misses: 0 }
    }

    /// The cached vector, or `compute()`'s (then cached). A capacity of 0 disables caching.
    pub fn get_or_insert<E>(
        &mut self,
        model: &str,
        text: &str,
        compute: impl FnOnce() -> Result<Vec<f32>, E>,
    ) -> Result<Vec<f32>, E> {
        self.tick += 1;
        let key = (model.to_string(), text.to_string());
        if let Some((used, v)) = self.entries.get_mut(&key) {
            *used = self.tick;
            self.hits += 1;
            return Ok(v.clone());
        }
        self.misses += 1;
        let v = compute()?;
        if self.capacity > 0 {
            self.shrink_to(self.capacity - 1);
            self.entries.insert(key, (self.tick, v.clone()));
        }
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

    fn get(c: &mut QueryCache, model: &str, text: &str, value: f32) -> Vec<f32> {
        c.get_or_insert::<()>(model, text, || Ok(vec![value])).unwrap()
    }

    #[test]
    fn hits_do_not_recompute_and_model_is_part_of_the_key() {
        let mut c = QueryCache::new(4);
        assert_eq!(get(&mut c, "m", "q", 1.0), vec![1.0]);
        assert_eq!(c.get_or_insert::<()>("m", "q", || panic!("cached")).unwrap(), vec![1.0]);
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
        assert!(c.get_or_insert("m", "q", || Err("boom")).is_err());
        get(&mut c, "m", "q", 1.0);
        assert_eq!(c.stats().0, 0);
    }
}
