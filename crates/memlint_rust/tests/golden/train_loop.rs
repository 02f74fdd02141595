// A training loop as tch's examples write it.
use anyhow::Result;
use tch::{nn, nn::Module, nn::OptimizerConfig, Device};

fn main() -> Result<()> {
    let m = tch::vision::mnist::load_dir("data")?;
    let vs = nn::VarStore::new(Device::cuda_if_available());
    let net = nn::seq().add(nn::linear(vs.root() / "fc1", 784, 128, Default::default())).add_fn(|xs| xs.relu());
    let mut opt = nn::Adam::default().build(&vs, 1e-3)?;
    for epoch in 1..=10 {
        for (bimages, blabels) in m.train_iter(256).shuffle().to_device(vs.device()) {
            let loss = net.forward(&bimages).cross_entropy_for_logits(&blabels);
            opt.backward_step(&loss);
        }
        println!("epoch: {:4}", epoch);
    }
    Ok(())
}
