// Values read back to the host every step, casts and ranges.
use tch::{Device, Tensor};

fn report(losses: &[Tensor], steps: i64) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for i in 0..steps as usize {
        let l = f64::try_from(&losses[i])?;
        total += l + losses[i].double_value(&[]);
        let on_cpu = losses[i].to(Device::Cpu);
        let values = Vec::<f32>::try_from(&on_cpu)?;
        assert!(!values.is_empty(), "step {} has no loss", i);
    }
    Ok(total / steps as f64)
}
