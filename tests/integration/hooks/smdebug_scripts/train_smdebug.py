"""An smdebug-era PyTorch training script, unchanged except for nothing at all (run with the alias)."""

import sys

import smdebug.pytorch as smd
import torch
import torch.nn as nn
from smdebug import modes
from smdebug.core.collection import CollectionKeys

out_dir = sys.argv[1]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 1))
loss_fn = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)

hook = smd.get_hook(create_if_not_exists=True)  # None: no SageMaker configuration here
if hook is None:
    hook = smd.Hook(
        out_dir=out_dir,
        save_config=smd.SaveConfig(
            {
                modes.TRAIN: smd.SaveConfigMode(save_interval=2),
                modes.EVAL: smd.SaveConfigMode(save_interval=1),
            }
        ),
        include_collections=[CollectionKeys.WEIGHTS, CollectionKeys.GRADIENTS, CollectionKeys.LOSSES],
    )
hook.register_module(model)
hook.register_loss(loss_fn)
hook.set_mode(modes.TRAIN)
for step in range(6):
    x, y = torch.randn(8, 4), torch.randn(8, 1)
    opt.zero_grad()
    # step 4 makes the loss explode, so the rule below fires there
    loss = loss_fn(model(x), y * (1000.0 if step == 4 else 1.0))
    loss.backward()
    opt.step()
hook.set_mode(modes.EVAL)
with torch.no_grad():
    for _ in range(2):
        loss_fn(model(torch.randn(8, 4)), torch.randn(8, 1))
hook.close()
print("trained", type(hook).__module__)
