"""A small image-classification training script with the hazards memlint
finds. Run `memlint check examples/` to see them."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader, TensorDataset


class SmallNet(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(3, 32, 3, padding=1)
        self.head = nn.Linear(32, classes)
        self.temperature = nn.Parameter(torch.ones(1))

    def forward(self, x):
        h = F.relu(self.conv(x)).mean(dim=(2, 3))
        return self.head(h) / self.temperature


def init_weights(model):
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            m.weight.data.normal_(0.0, 0.02)
    model.temperature.fill_(1.0)


def train_one_epoch(model, loader, optimizer, scaler, device):
    model.train()
    total_loss = 0
    features = []
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        with autocast():
            out = model(x)
            loss = F.cross_entropy(out, y)
        scaler.scale(loss).backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        total_loss += loss
        features.append(out[:, 0])
    return total_loss / len(loader), features


def validate(model, val_loader, device):
    model.eval()
    correct = 0
    for x, y in val_loader:
        out = model(x.to(device))
        correct += (out.argmax(dim=1) == y.to(device)).sum().item()
    return correct / len(val_loader.dataset)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = TensorDataset(torch.randn(256, 3, 16, 16), torch.randint(0, 10, (256,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    val_loader = DataLoader(data, batch_size=64)
    model = SmallNet().to(device)
    init_weights(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = GradScaler(enabled=device == "cuda")
    for epoch in range(args.epochs):
        loss, _ = train_one_epoch(model, loader, optimizer, scaler, device)
        acc = validate(model, val_loader, device)
        print(f"epoch {epoch}: loss {loss.item():.3f} acc {acc:.3f}")


if __name__ == "__main__":
    main()
