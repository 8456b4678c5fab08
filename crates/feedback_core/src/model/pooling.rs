//! Turning a `[batch, seq, hidden]` hidden state into one vector per text.

use super::manifest::Pooling;

/// Pools one text's token states (`seq × hidden`, row-major) under its attention mask.
pub fn pool(states: &[f32], mask: &[i64], hidden: usize, pooling: Pooling) -> Vec<f32> {
    match pooling {
        Pooling::Cls => states[..hidden].to_vec(),
        Pooling::Mean => {
            let mut sum = vec![0f32; hidden];
            let mut count = 0f32;
            for (token, &m) in states.chunks_exact(hidden).zip(mask) {
                if m != 0 {
                    sum.iter_mut().zip(token).for_each(|(s, t)| *s += t);
                    count += 1.0;
                }
            }
            let count = count.max(1e-9);
            sum.iter_mut().for_each(|s| *s /= count);
            sum
        }
    }
}

/// Scales `v` to unit length (left as is when it is all zeros).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb).max(1e-12)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cls_takes_first_token() {
        let states = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(pool(&states, &[1, 1, 1], 2, Pooling::Cls), vec![1.0, 2.0]);
    }

    #[test]
    fn mean_ignores_padding() {
        let states = [1.0, 2.0, 3.0, 4.0, 100.0, 100.0];
        assert_eq!(pool(&states, &[1, 1, 0], 2, Pooling::Mean), vec![2.0, 3.0]);
    }

    #[test]
    fn normalize_gives_unit_length() {
        let mut v = vec![3.0, 4.0];
        l2_normalize(&mut v);
        assert!((v[0] - 0.6).abs() < 1e-6 && (v[1] - 0.8).abs() < 1e-6);
        let mut zero = vec![0.0, 0.0];
        l2_normalize(&mut zero);
        assert_eq!(zero, vec![0.0, 0.0]);
        assert!((cosine(&[1.0, 0.0], &[2.0, 0.0]) - 1.0).abs() < 1e-6);
    }
}
