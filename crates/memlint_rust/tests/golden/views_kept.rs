// Views kept across iterations, `if let`, `match` and `while let`.
use tch::Tensor;

fn keep(batches: &mut dyn Iterator<Item = Tensor>) -> Vec<Tensor> {
    let mut kept: Vec<Tensor> = Vec::new();
    let mut first: Option<Tensor> = None;
    while let Some(batch) = batches.next() {
        if let Some(f) = &first {
            kept.push(batch.narrow(0, 0, 1) - f);
        } else {
            first = Some(batch.shallow_clone());
        }
        match kept.len() {
            0 => continue,
            n if n > 100 => break,
            _ => kept.push(batch.select(0, 0).copy()),
        }
    }
    kept
}
