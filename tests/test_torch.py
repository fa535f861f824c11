"""A torch model with its optimizer: dill fails on it, so the hybrid pickler carries it (cloudpickle before it)."""

from __future__ import annotations

import random
import sys
import textwrap
import types
import warnings
from typing import Any

import pytest
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
    # dill fails on the two together; the notebook's class by dill and the rest by the C pickler does not
    assert {g["serializer"] for g in groups if "net" in g["names"]} == {"hybrid"}
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


def test_the_gradients_come_back_with_the_weights(store: Store) -> None:
    module = types.ModuleType("__main__")
    exec(
        textwrap.dedent(TRAINING) + "w = torch.ones(2, requires_grad=True)\n(w * 3).sum().backward()\n", module.__dict__
    )
    Checkpointer(store, "grads.ipynb", module).save()
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "grads.ipynb", fresh).restore("latest").not_restored == {}
    assert fresh.__dict__["w"].grad.tolist() == [3.0, 3.0] and fresh.__dict__["w"].requires_grad
    before, after = module.__dict__["net"].fc.weight, fresh.__dict__["net"].fc.weight
    assert isinstance(after, torch.nn.Parameter) and torch.equal(after.grad, before.grad)
    assert fresh.__dict__["opt"].param_groups[0]["params"][0] is after  # still the optimizer's


def test_a_tensor_autograd_made_comes_back_detached_and_a_view_of_a_leaf_as_that_view(store: Store) -> None:
    """A graph cannot be pickled: torch's pickling made ``loss`` a leaf that requires grad, so ``loss.backward()``
    after a restore gave ``w`` no gradient, and said nothing."""
    module = types.ModuleType("__main__")
    exec("import torch\nw = torch.ones(3, requires_grad=True)\nloss = (w * 2).sum()\nhead = w[:2]\n", module.__dict__)
    Checkpointer(store, "graph.ipynb", module).save()
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "graph.ipynb", fresh).restore("latest").not_restored == {}
    w, loss, head = (fresh.__dict__[n] for n in ("w", "loss", "head"))
    assert loss.item() == 6.0 and not loss.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        loss.backward()
    head.sum().backward()
    assert head._base is w and w.grad.tolist() == [1.0, 1.0, 0.0]


def test_torch_s_random_stream_comes_back_and_a_kernel_without_torch_keeps_the_others(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("__main__")
    module.__dict__["epochs"] = 3
    ckpt = Checkpointer(store, "seeded.ipynb", module)
    torch.manual_seed(7)
    random.seed(7)
    cid = ckpt.save()
    expected = (torch.rand(3), random.random())
    torch.rand(5)  # a cell that draws
    ckpt.restore(cid)
    drawn = (torch.rand(3), random.random())
    assert torch.equal(drawn[0], expected[0]) and drawn[1] == expected[1]

    monkeypatch.setitem(sys.modules, "torch", None)  # as in a kernel without torch: "import torch" fails
    report = ckpt.restore(cid)
    assert report.not_restored["torch random stream"].startswith("not set again: ModuleNotFoundError")
    assert random.random() == expected[1] and module.__dict__["epochs"] == 3


def test_tensors_on_one_storage_come_back_on_one_and_a_changed_element_writes_a_chunk(store: Store) -> None:
    """torch pickles each tensor with a copy of its storage: a slice came back apart from its tensor, and a large
    tensor was written whole again whenever its group was."""
    module = types.ModuleType("__main__")
    exec(
        "import torch\nx = torch.rand(8_000_000, generator=torch.Generator().manual_seed(0))\n"
        "window = x[10:20]\ngrid = x.view(4000, 2000).T\n"
        "w = torch.ones(3, requires_grad=True)\n(w * 2).sum().backward()\nw.tag = 'weights'\n",
        module.__dict__,
    )
    ckpt = Checkpointer(store, "views.ipynb", module)
    first = ckpt.save()
    exec("x[5] = -1.0", module.__dict__)
    second = ckpt.save()
    records = {r.id: r for r in ckpt.checkpoints()}
    # 32 MB of float32 in 4 MiB chunks: the changed element's chunk is written again, not the tensor
    assert records[first].new_bytes > 28_000_000 and records[second].new_bytes < 5_000_000

    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "views.ipynb", fresh).restore(second).not_restored == {}
    x, window, grid, w = (fresh.__dict__[n] for n in ("x", "window", "grid", "w"))
    window[0] = 99.0  # a write through the slice reaches the tensor, and the transposed view, as before
    assert (x[5].item(), x[10].item(), grid[10, 0].item()) == (-1.0, 99.0, 99.0)
    assert window._base is x and grid._base is x  # views as autograd knows them
    assert (w.grad.tolist(), w.requires_grad, w.is_leaf, w.tag) == ([2.0, 2.0, 2.0], True, True, "weights")
    x.resize_(4)  # a storage of torch's own, which a tensor may resize
    assert x.shape == (4,) and x[1].item() == module.__dict__["x"][1].item()


def test_a_tensor_checkpointed_in_the_kernel_can_still_be_resized_and_is_not_written_again(store: Store) -> None:
    """A kernel that writes its checkpoints itself (a writer was stopped for memory) pickled each tensor through
    ``tensor.numpy()``, which makes its storage one no tensor can resize: ``x.resize_(...)`` raised in the next
    cell, and every tensor was saved as on borrowed memory from then on, written again and listed changed."""
    module = types.ModuleType("__main__")
    exec("import torch\nx = torch.arange(6.0)\nrow = x[:3]\n", module.__dict__)
    ckpt = Checkpointer(store, "resize.ipynb", module, background=False)
    first = ckpt.save()
    second = ckpt.save()
    assert [r.changed for r in ckpt.checkpoints() if r.id == second] == [[]]
    x = module.__dict__["x"]
    x.resize_(12)  # RuntimeError: Trying to resize storage that is not resizable
    assert x.shape == (12,) and first != second


def test_a_tensor_made_from_a_numpy_array_comes_back_on_the_array_s_memory(store: Store) -> None:
    """``torch.from_numpy`` shares the array's memory: each came back with a copy of its own, so a write through one
    no longer reached the other. From a view of the array too, and with the tensor met before its array."""
    module = types.ModuleType("__main__")
    exec(
        "import numpy as np, torch\nimages = np.zeros((64, 8, 8), dtype=np.float32)\nbatch = torch.from_numpy(images)\n"
        "a_tail = torch.from_numpy(images[32:])\npairs = [(torch.from_numpy(b := np.ones(3)), b)]\n",
        module.__dict__,
    )
    ckpt = Checkpointer(store, "from_numpy.ipynb", module)
    ckpt.save()
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "from_numpy.ipynb", fresh).restore("latest").not_restored == {}
    images, batch, a_tail, pairs = (fresh.__dict__[n] for n in ("images", "batch", "a_tail", "pairs"))
    images[40, 0, 0] = 5.0
    batch[0, 0, 0] = 7.0
    pairs[0][0][1] = 2.0  # in the tuple, the tensor before its array
    assert (batch[40, 0, 0].item(), a_tail[8, 0, 0].item(), images[0, 0, 0], pairs[0][1][1]) == (5.0, 5.0, 7.0, 2.0)


def test_an_optimizer_made_with_a_model_that_replay_rebuilds_drives_the_rebuilt_model(kernels: Any) -> None:
    """The model holds a generator, so it is skipped and rebuilt by replay; its optimizer was checkpointed. It came
    back on the parameters of the model as saved, not on the rebuilt model's: ``opt.step()`` trained nothing, and
    said nothing. Made again by the cells replay runs, the optimizer and its scheduler now come from them too; and
    the model is an
    instance of the restored ``Net``, not of the one its cell defined again."""
    k = kernels("replayed_model.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    k.ok(
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(2, 1)\n        self.feed = (i for i in range(3))\n"
        "torch.manual_seed(0)\nnet = Net()"
    )
    k.ok(
        "opt = torch.optim.SGD(net.parameters(), lr=0.1)\nsched = torch.optim.lr_scheduler.StepLR(opt, 1)\n"
        "net.fc(torch.ones(1, 2)).sum().backward()\nopt.step()\nsched.step()"
    )
    k.ok("%checkpoint save")
    expected = k.value("net.fc.weight.tolist()")
    k.close()

    fresh = kernels("replayed_model.ipynb")
    fresh.ok("%load_ext jupyter_ckpt")
    out = fresh.ok("%checkpoint restore latest --replay")
    assert "rebuilt by running its cells again: net" in out and "opt: replayed with net (they share objects)" in out
    assert fresh.value("net.fc.weight.tolist()") == expected
    assert fresh.value("opt.param_groups[0]['params'][0] is net.fc.weight and type(net) is Net") is True
    assert fresh.value("sched.optimizer is opt and sched.last_epoch") == 1
    fresh.ok("net.fc(torch.ones(1, 2)).sum().backward()\nopt.step()")
    assert fresh.value("net.fc.weight.tolist()") != expected  # the optimizer trains the model in the namespace


def test_an_optimizer_made_in_a_cell_that_does_not_name_the_replayed_model_drives_the_rebuilt_model(
    store: Store,
) -> None:
    """The model holds a generator, so it is skipped and rebuilt by replay. Its parameters were listed in one cell
    and the optimizer made from that list in the next, which does not name the model: both came back as saved,
    on the old model's parameters, and the cell that trained the model was replayed with that old optimizer, so
    the rebuilt model had not even had its step. Both are now made again with the model."""
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "params.ipynb", module)
    sources = [
        "import torch\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(2, 1)\n        self.feed = (i for i in range(3))\n"
        "torch.manual_seed(0)\nnet = Net()",
        "params = list(net.parameters())",
        "opt = torch.optim.SGD(params, lr=0.1)",
        "net.fc(torch.ones(1, 2)).sum().backward()\nopt.step()",
    ]
    for count, source in enumerate(sources, 1):
        exec(source, module.__dict__)
        ckpt.record_cell(count, source, True, 0.0)
    expected = module.__dict__["net"].fc.weight.tolist()
    ckpt.save()
    fresh = types.ModuleType("__main__")
    report = Checkpointer(store, "params.ipynb", fresh, replay_mode="auto").restore("latest")
    net, params, opt = (fresh.__dict__[n] for n in ("net", "params", "opt"))
    assert report.replay["net"] == "replayed" and net.fc.weight.tolist() == expected
    assert opt.param_groups[0]["params"][0] is params[0] is net.fc.weight  # the optimizer drives the model


def test_a_torchscript_module_scripted_or_traced_comes_back_and_computes_as_it_did(store: Store) -> None:
    """pickle cannot save a TorchScript module ("does not have a __getstate__ method defined"): it was not
    restored. It is saved as ``torch.jit.save`` writes it."""
    module = types.ModuleType("__main__")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch deprecates TorchScript, which notebooks use
        exec(
            "import torch\ntorch.manual_seed(0)\n"
            "layers = [torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1)]\n"
            "scripted = torch.jit.script(torch.nn.Sequential(*layers))\nscripted.eval()\n"
            "traced = torch.jit.trace(torch.nn.Linear(2, 1), torch.ones(1, 2))\n",
            module.__dict__,
        )
    Checkpointer(store, "jit.ipynb", module).save()
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "jit.ipynb", fresh).restore("latest").not_restored == {}
    x = torch.ones(1, 2)
    for name in ("scripted", "traced"):
        assert torch.equal(fresh.__dict__[name](x), module.__dict__[name](x))
        assert isinstance(fresh.__dict__[name], torch.jit.ScriptModule)
    assert not fresh.__dict__["scripted"].training


def test_a_module_given_a_parametrization_comes_back_parametrized_with_its_optimizer_on_it(store: Store) -> None:
    """``weight_norm(layer)`` from ``torch.nn.utils.parametrizations``: torch refuses to pickle a parametrized module
    ("only supported through state_dict()"), and the variable was not restored."""
    module = types.ModuleType("__main__")
    exec(
        "import torch\nfrom torch.nn.utils import parametrizations\ntorch.manual_seed(0)\n"
        "layer = parametrizations.weight_norm(torch.nn.Linear(2, 2))\n"
        "opt = torch.optim.SGD(layer.parameters(), lr=0.1)\n",
        module.__dict__,
    )
    Checkpointer(store, "parametrized.ipynb", module).save()
    fresh = types.ModuleType("__main__")
    assert Checkpointer(store, "parametrized.ipynb", fresh).restore("latest").not_restored == {}
    layer, opt, x = fresh.__dict__["layer"], fresh.__dict__["opt"], torch.ones(1, 2)
    assert torch.equal(layer(x), module.__dict__["layer"](x))
    assert torch.nn.utils.parametrize.is_parametrized(layer, "weight") and isinstance(layer, torch.nn.Linear)
    assert any(p is layer.parametrizations.weight.original0 for p in opt.param_groups[0]["params"])
