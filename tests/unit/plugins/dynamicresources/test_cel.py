"""CEL for DRA selectors: the device variable, Kubernetes' quantity and semver libraries, and
errors that name the expression (never a match)."""

from __future__ import annotations

import pytest

from shoal.plugins.dynamicresources.cel import CelError, compile_selector, device_activation

GPU = "gpu.nvidia.com"
DEVICE = device_activation(
    GPU,
    {
        f"{GPU}/productName": "NVIDIA A100",
        f"{GPU}/driverVersion": ("version", "550.54.15"),
        f"{GPU}/index": 3,
        f"{GPU}/mig": False,
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
    },
    {f"{GPU}/memory": 80 * 2**30},
)


@pytest.mark.parametrize(
    ("expression", "want"),
    [
        (f'device.driver == "{GPU}"', True),
        (f'device.attributes["{GPU}"].productName == "NVIDIA A100"', True),
        (f'device.attributes["{GPU}"].productName.startsWith("NVIDIA H")', False),
        (f'device.attributes["{GPU}"].index > 2 && !device.attributes["{GPU}"].mig', True),
        ('device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"', True),
        (f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0', True),
        (f'device.capacity["{GPU}"].memory.isGreaterThan(quantity("80Gi"))', False),
        (f'device.capacity["{GPU}"].memory.isLessThan(quantity("81Gi"))', True),
        (f'device.capacity["{GPU}"].memory.asInteger() == 85899345920', True),
        (f'device.capacity["{GPU}"].memory == quantity("80Gi")', True),
        (f'device.attributes["{GPU}"].driverVersion.isGreaterThan(semver("550.0.0"))', True),
        (f'device.attributes["{GPU}"].driverVersion.major() == 550', True),
        ('semver("1.2.3-rc.1").isLessThan(semver("1.2.3"))', True),
        ('isQuantity("1.5Gi") && !isQuantity("lots") && isSemver("1.0.0")', True),
        ('has(device.attributes["other.example.com"].x)', False),
        (f'has(device.attributes["{GPU}"].productName)', True),
    ],
)
def test_dra_selectors(expression: str, want: bool) -> None:
    assert compile_selector(expression).matches(DEVICE) is want


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        (f'device.attributes["{GPU}"].nosuch == "x"', "runtime error"),
        ("device.driver", "must return bool"),
        ("device.driver ==", "compilation failed"),
        ("unknownFunction(device)", "runtime error"),
        ('quantity("lots").sign() == 1', "runtime error"),
        ('quantity("1").compareTo(semver("1.0.0")) == 0', "runtime error"),
    ],
)
def test_what_cannot_be_evaluated_is_an_error_naming_the_expression(expression: str, why: str) -> None:
    with pytest.raises(CelError) as info:
        compile_selector(expression).matches(DEVICE)
    assert why in str(info.value) and expression in str(info.value)
    assert "in activation" not in str(info.value)  # cel-python's dump of the whole activation is cut
