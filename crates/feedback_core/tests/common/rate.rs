//! A tally of hits over a total, shared by the corpus tests (`#[path = "common/rate.rs"] mod rate;`).

/// hits / total, with `-` for an empty group.
#[derive(Default, Clone, Copy)]
pub struct Rate {
    pub hits: usize,
    pub total: usize,
}

#[allow(dead_code)] // each corpus test uses part of it
impl Rate {
    pub fn add(&mut self, hit: bool) {
        self.total += 1;
        self.hits += usize::from(hit);
    }
    pub fn merge(mut self, o: Rate) -> Rate {
        self.hits += o.hits;
        self.total += o.total;
        self
    }
    pub fn value(self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.hits as f64 / self.total as f64
        }
    }
    pub fn show(self) -> String {
        if self.total == 0 {
            "-".to_string()
        } else {
            format!("{:.3} ({}/{})", self.value(), self.hits, self.total)
        }
    }
}
