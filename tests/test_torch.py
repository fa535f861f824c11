"""A torch model with its optimizer: dill fails on it, so cloudpickle carries it."""

from __future__ import annotations

import textwrap
import types

import torch

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.store import Store

TRAINING = """
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
for _ in range(3):
    opt.zero_grad()
    net(torch.ones(3, 4)).pow(2).sum().backward()
    opt.step()
"""


def test_a_model_and_its_optimizer_round_trip_together(store: Store) -> None:
    module = types.ModuleType("__main__")
    exec(textwrap.dedent(TRAINING), module.__dict__)
    ckpt = Checkpointer(store, "train.ipynb", module)
    cid = ckpt.save()
    groups = store.manifest(cid)["groups"]
    assert {g["serializer"] for g in groups if "net" in g["names"]} == {"cloudpickle"}
    expected = module.net(torch.ones(1, 4)).detach()
    module.__dict__["opt"].step()  # move on, then go back

    with torch.no_grad():
        module.net.fc.weight.zero_()
    ckpt.restore(cid)
    net, opt, net_class = module.net, module.opt, module.Net
    assert torch.equal(net(torch.ones(1, 4)).detach(), expected)
    assert isinstance(net, net_class)
    assert opt.param_groups[0]["params"][0] is net.fc.weight  # the optimizer still drives the model
    assert opt.state[net.fc.weight]["momentum_buffer"].shape == (2, 4)
