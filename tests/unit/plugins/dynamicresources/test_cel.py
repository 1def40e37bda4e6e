"""CEL for DRA selectors: the device variable, Kubernetes' quantity and semver libraries, and
errors that name the expression (never a match)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from shoal.plugins.dynamicresources.allocator import Matcher, share_id
from shoal.plugins.dynamicresources.cel import CelError, Selector, compile_selector, device_activation
from shoal.plugins.dynamicresources.objects import Device, DeviceId

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
        # CEL's equality: a bool equals no int (cel-python alone: `false == 0` true, `0 == false`
        # an error), in lists and maps too
        (f'device.attributes["{GPU}"].mig == 0', False),
        (f'device.attributes["{GPU}"].mig != 0', True),
        (f'0 == device.attributes["{GPU}"].mig', False),
        (f'device.attributes["{GPU}"].mig in [0, 1]', False),
        (f'device.attributes["{GPU}"].mig in [false]', True),
        (f'device.attributes["{GPU}"].index in [3, 4]', True),
        ("[true] == [1]", False),
        ('{"a": 1} == {"a": 1} && {"a": 1} != {"a": 2}', True),
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


ATTR = ("attributes", GPU)


@pytest.mark.parametrize(
    ("expression", "reads"),
    [
        (f'device.driver == "{GPU}"', (("driver",),)),
        (
            f'device.driver == "{GPU}" && device.attributes["{GPU}"].type == "mig"',
            (("driver",), (*ATTR, "type")),
        ),
        (f"device.attributes['{GPU}'][\"profile\"] == '1g.10gb'", ((*ATTR, "profile"),)),
        (f'has(device.attributes["{GPU}"].productName)', ((*ATTR, "productName"),)),
        (
            f'device.capacity["{GPU}"].memory.compareTo(quantity("40Gi")) >= 0',
            (("capacity", GPU, "memory"),),
        ),
        ("device.allowMultipleAllocations", (("allowMultipleAllocations",),)),
        ('semver("1.2.3").isLessThan(semver("1.2.4"))', ()),
        # ``device`` used as a whole, or a key that is not a plain literal: anything may matter
        (f'size(device.attributes["{GPU}"]) > 2', None),
        (f'device.attributes["{GPU}"].exists(k, k == "mig")', None),
        ('device.attributes["gpu." + "nvidia.com"].index == 3', None),
        (f'device.attributes["{GPU}\\x2e"].index == 3', None),
        ("device == device", None),
        ("device.name == 'x'", None),
    ],
)
def test_what_a_selector_reads_of_the_device(
    expression: str, reads: tuple[tuple[str, ...], ...] | None
) -> None:
    assert compile_selector(expression).reads == reads


def mig(name: str, profile: str, uuid: str, memory: int = 10 * 2**30, **extra: Any) -> Device:
    attributes: dict[str, Any] = {f"{GPU}/type": "mig", f"{GPU}/profile": profile, f"{GPU}/uuid": uuid}
    attributes |= {f"{GPU}/{k}": v for k, v in extra.items()}
    return Device(DeviceId(GPU, "node-0", name), attributes, {f"{GPU}/memory": memory})


def test_devices_holding_what_a_selector_reads_share_one_evaluation_and_the_same_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The expensive part (cel-python) runs once per distinct values read, not once per device;
    a device that differs in a value read, or lacks it, is evaluated on its own."""
    calls: list[str] = []
    real = Selector.matches

    def counted(self: Selector, activation: Any) -> bool:
        calls.append(self.expression)
        return real(self, activation)

    monkeypatch.setattr(Selector, "matches", counted)
    matcher = Matcher()
    profile = f'device.attributes["{GPU}"].profile == "1g.10gb"'
    same = [mig(f"mig-{i}", "1g.10gb", f"MIG-{i}") for i in range(20)]
    assert all(matcher.matches(profile, d) for d in same)
    assert calls == [profile]
    assert not matcher.matches(profile, mig("other", "2g.20gb", "MIG-x"))
    assert len(calls) == 2
    # an attribute of equal value but another type is another value (true is not 1)
    index = f'device.attributes["{GPU}"].index == 1'
    assert matcher.matches(index, mig("int", "1g.10gb", "a", index=1))
    matcher.matches(index, mig("bool", "1g.10gb", "b", index=True))
    assert calls[2:] == [index, index]
    with pytest.raises(CelError):  # absent: CEL's error, every time, never remembered as a mismatch
        matcher.matches(index, mig("none", "1g.10gb", "c"))
    with pytest.raises(CelError):
        matcher.matches(index, mig("none-2", "1g.10gb", "d"))
    # a selector reading the whole map is evaluated per device
    whole = f'device.attributes["{GPU}"].exists(k, k == "uuid")'
    calls.clear()
    assert all(matcher.matches(whole, d) for d in same[:3])
    assert calls == [whole] * 3


@pytest.mark.parametrize(
    "expression",
    [
        f'device.attributes["{GPU}"].profile == "1g.10gb"',
        f'device.capacity["{GPU}"].memory.compareTo(quantity("20Gi")) >= 0',
        f'device.attributes["{GPU}"].index > 2 || device.attributes["{GPU}"].profile.startsWith("2g")',
        f'has(device.attributes["{GPU}"].index) && device.attributes["{GPU}"].index == 3',
    ],
)
def test_a_shared_evaluation_gives_each_device_its_own_answer(expression: str) -> None:
    """Against cel-python on each device alone, over devices that differ in read and unread values."""
    devices = [
        mig(f"d{i}", profile, f"MIG-{i}", memory, **({"index": index} if index is not None else {}))
        for i, (profile, memory, index) in enumerate(
            (p, m, x)
            for p in ("1g.10gb", "2g.20gb")
            for m in (10 * 2**30, 20 * 2**30, 40 * 2**30)
            for x in (None, 1, 3)
        )
    ]
    matcher = Matcher()
    for d in devices * 2:
        direct: bool | type[CelError]
        try:
            direct = compile_selector(expression).matches(
                device_activation(GPU, d.attributes, d.capacity, d.multi)
            )
        except CelError:
            direct = CelError
        if direct is CelError:
            with pytest.raises(CelError):
                matcher.matches(expression, d)
        else:
            assert matcher.matches(expression, d) is direct


def test_share_ids_are_version_4_uuids_and_never_repeat() -> None:
    ids = [share_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:100]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)
