// Gradient accumulation: a scaled loss, a guarded step, and a running
// total that keeps each graph.
use tch::{nn, nn::Module, Tensor};

fn train(net: &nn::Sequential, opt: &mut nn::Optimizer, data: &[(Tensor, Tensor)], accum: i64) -> Tensor {
    let mut total = Tensor::zeros([], tch::kind::FLOAT_CPU);
    for (step, (xs, ys)) in data.iter().enumerate() {
        let loss = net.forward(xs).mse_loss(ys, tch::Reduction::Mean) / accum as f64;
        loss.backward();
        total += &loss;
        if (step as i64 + 1) % accum == 0 {
            opt.step();
            opt.zero_grad();
        }
    }
    let mean = { let n = data.len() as f64; total / n };
    mean
}
