"""timm models for the zoo: a default list covering many families, each small (mostly < 6M params)
and fed small images, built with `timm.create_model(name, pretrained=False)` (nothing downloaded)."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import torch

from bringup.errors import BadInput
from bringup.models.tiny import Built, ConfigError, first_float, seeded_generator

# timm (and the torchvision it pulls, which pins one torch release) is an optional extra.
MISSING = "timm is not installed (an optional extra): pip install 'bringup[timm]'"


def available() -> bool:
    return importlib.util.find_spec("timm") is not None


def require() -> None:
    """BadInput (one line, exit 2) when timm models are asked for and timm is not installed."""
    if not available():
        raise BadInput(MISSING)


@dataclass(frozen=True)
class TimmModel:
    name: str
    family: str
    image: int | None = 64


# One small model per family (params with num_classes=10 in the comments). image: the input side; a
# model with a fixed patch grid is built with img_size=image when it takes it; None = the model's
# own default input size (window/grid constraints that 64 px can't meet).
DEFAULT_MODELS: tuple[TimmModel, ...] = (
    TimmModel("test_resnet", "resnet"),  # 0.4M
    TimmModel("resnet10t", "resnet-d"),  # 4.9M
    TimmModel("test_efficientnet", "efficientnet"),  # 0.1M
    TimmModel("test_convnext", "convnext"),  # 0.2M
    TimmModel("test_vit", "vit"),  # 0.3M
    TimmModel("test_byobnet", "byobnet"),  # 0.2M
    TimmModel("test_nfnet", "nfnet"),  # 0.2M
    TimmModel("test_coatnet", "coatnet", None),
    TimmModel("test_maxvit", "maxvit", None),
    TimmModel("test_mambaout", "mambaout"),  # 0.2M
    TimmModel("test_vit_relpos", "vit_relpos"),
    TimmModel("mobilenetv3_small_050", "mobilenetv3"),  # 0.6M
    TimmModel("mobilenetv2_035", "mobilenetv2"),  # 0.4M
    TimmModel("mobilenetv4_conv_small_050", "mobilenetv4"),  # 1.0M
    TimmModel("mobilevit_xxs", "mobilevit"),  # 1.0M
    TimmModel("mobilevitv2_050", "mobilevitv2"),  # 1.1M
    TimmModel("deit_tiny_patch16_224", "deit"),  # 5.5M
    TimmModel("regnetx_002", "regnet"),  # 2.3M
    TimmModel("ghostnet_050", "ghostnet"),  # 1.3M
    TimmModel("mnasnet_050", "mnasnet"),  # 1.0M
    TimmModel("lcnet_050", "lcnet"),  # 0.6M
    TimmModel("tinynet_e", "tinynet"),  # 0.8M
    TimmModel("dla46_c", "dla"),  # 1.1M
    TimmModel("efficientvit_m0", "efficientvit_msra", 224),  # 2.2M
    TimmModel("efficientvit_b0", "efficientvit_mit"),  # 2.1M
    TimmModel("levit_128s", "levit", 224),  # 7.0M
    TimmModel("pit_ti_224", "pit", 224),  # 4.7M
    TimmModel("xcit_nano_12_p16_224", "xcit", 224),  # 2.9M
    TimmModel("edgenext_xx_small", "edgenext"),  # 1.2M
    TimmModel("fastvit_t8", "fastvit"),  # 3.3M
    TimmModel("repvit_m0_9", "repvit"),  # 4.7M
    TimmModel("mobileone_s0", "mobileone"),  # 4.3M
    TimmModel("pvt_v2_b0", "pvt_v2"),  # 3.4M
    TimmModel("efficientformerv2_s0", "efficientformer_v2", 224),  # 3.3M
    TimmModel("rexnet_100", "rexnet"),  # 3.5M
    TimmModel("ese_vovnet19b_slim_dw", "vovnet"),  # 1.4M
    TimmModel("hardcorenas_a", "hardcorenas"),  # 4.0M
    TimmModel("tf_mobilenetv3_small_minimal_100", "tf_mobilenetv3"),  # 1.0M
    TimmModel("starnet_s050", "starnet"),  # 0.4M
    TimmModel("cs3darknet_focus_s", "cspnet"),  # 2.8M
    TimmModel("convnextv2_atto", "convnextv2"),  # 3.4M
    TimmModel("inception_next_atto", "inception_next"),  # 3.2M
    TimmModel("fasternet_t0", "fasternet"),  # 2.6M
    TimmModel("regnety_002", "regnety"),  # 2.8M
    TimmModel("gmlp_ti16_224", "mlp_mixer/gmlp", 224),  # 5.7M
    TimmModel("crossvit_tiny_240", "crossvit", 240),  # 6.7M
    TimmModel("hgnetv2_b0", "hgnet"),  # 4.0M
    TimmModel("ghostnetv2_100", "ghostnetv2"),  # 4.9M
    TimmModel("densenet121", "densenet"),  # 7.0M
    TimmModel("dpn48b", "dpn"),  # 8.3M
)


def families() -> set[str]:
    return {m.family.split(" ")[0].split("/")[0] for m in DEFAULT_MODELS}


def build(name: str, seed: int = 0) -> Built:
    if not available():  # a planned timm case (`run --quick`) in an environment without the extra
        raise ConfigError(MISSING)
    image = next((m.image for m in DEFAULT_MODELS if m.name == name), 64)
    return build_timm(name, image=image, seed=seed)


def build_timm(name: str, image: int | None = 64, batch: int = 2, seed: int = 0, num_classes: int = 10) -> Built:
    """timm.create_model(name, pretrained=False): img_size=image where the model takes it (a fixed patch
    grid is then built for that size), else its own input size if fixed, else image. image=None: the
    model's default input size."""
    import timm  # lazy: optional timm

    if not timm.is_model(name):  # a name, a tagged name (`vit_base_patch14_dinov2.lvd142m`) or a deprecated one
        raise ConfigError(f"unknown timm model {name!r}")
    kw: dict[str, Any] = {"pretrained": False, "num_classes": num_classes, "drop_rate": 0.0}
    size: tuple[int, int, int] | None = None
    try:
        torch.manual_seed(seed)
        if image is None:
            raise TypeError("use the default size")
        model = timm.create_model(name, **kw, img_size=image)
        size = (int(getattr(model, "in_chans", 3) or 3), image, image)
    except TypeError:
        try:
            torch.manual_seed(seed)
            model = timm.create_model(name, **kw)
        except Exception as e:
            raise ConfigError(f"timm.create_model: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    except Exception as e:
        raise ConfigError(f"timm.create_model: {type(e).__name__}: {e}".splitlines()[0][:300]) from e
    model = model.to(torch.float32).train()
    if size is None:
        cfg = getattr(model, "pretrained_cfg", None) or {}
        ch, h, w = (int(x) for x in cfg.get("input_size", (3, 224, 224)))
        size = (ch, h, w) if (image is None or cfg.get("fixed_input_size")) else (ch, image, image)

    def make_batch(step: int) -> dict[str, Any]:
        g = seeded_generator(seed * 1000 + step + 1)
        x = torch.randn(batch, *size, generator=g)
        return {"x": x, "labels": torch.randint(0, num_classes, (batch,), generator=g)}

    def fwd(m: torch.nn.Module, b: dict[str, Any]) -> Any:
        return m(b["x"])

    def loss(out: Any, b: dict[str, Any]) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out, b["labels"].to(out.device))

    n = sum(p.numel() for p in model.parameters())
    return Built(model, make_batch, fwd, loss, first_float, note=f"{type(model).__name__}, {n} params, input {size}")
