"""A server's network written in words ("8x 400Gb/s NDR InfiniBand", "RoCE v2, 8x200G", "NDR400 IB, 8 HCAs",
"3.2 Tbps EFA per instance"), read as its NICs: how many a server has and the line rate of each.

A rate is a number with its unit ("400 Gb/s", "50 GB/s": bytes, x 8; "3.2 Tbps"), a short form ("400G", "200GbE",
"25GbE") or an InfiniBand generation, whose 4x port runs at EDR 100, HDR 200, NDR 400, XDR 800 Gb/s ("HDR100" is a
split 100 Gb/s port; InfiniBand Trade Association roadmap). A count is a number or a count word before "x" or
before a part word ("8 HCAs", "one NIC per node", "8x ConnectX-7"), or after the rate ("200GbE x 4"), never a
number inside a part's name ("ConnectX-4", "a4-highgpu-8g"). A rate said to be a node's ("per node", "per
instance") or above the fastest NIC port shipping (MAX_NIC_GBPS) is the node's total, split over the NICs."""

from __future__ import annotations

import re
from dataclasses import dataclass

# a rate: its number, G or T, and the unit letters: b / bit (bits) or B / byte ("GB/s", "GBps": bytes, x 8; an
# all-capitals "GBPS" is taken for bits, as it is commonly written)
RATE = r"(\d+(?:\.\d+)?)\s*([GT])(bits?|bytes?|b)(ps|/s)"
_SHORT_RATE = re.compile(r"(?:(?<=^)|(?<=[^\w.-])|(?<=[x×]))(\d+(?:\.\d+)?)\s*G(?:bE|E)?(?![\w/])",
                         re.IGNORECASE)  # not a part of a name ("a4-highgpu-8g")
_IB_GENERATION = re.compile(r"\b(EDR|HDR|NDR|XDR)(\d{3})?\b", re.IGNORECASE)
_IB_GENERATION_GBPS = {"edr": 100.0, "hdr": 200.0, "ndr": 400.0, "xdr": 800.0}
_COUNT_WORDS = {"one": 1, "two": 2, "four": 4, "eight": 8, "sixteen": 16}
_NIC_COUNT = re.compile(rf"(?<![\w.-])(\d+|{'|'.join(_COUNT_WORDS)})\s*(?:[x×]\s*(?=[\w.])"
                        r"|(?:[\w-]+\s+)?(?:HCAs?|NICs?|ports?|rails?|adapters?)\b)", re.IGNORECASE)
_TRAILING_COUNT = re.compile(r"(?<=\w)\s+[x×]\s*(\d+)\b")  # '200GbE x 4', 'NDR x 8': after the rate
_NODE_TOTAL = re.compile(r"\bper\s+(?:node|host|server|instance|vm)\b", re.IGNORECASE)
MAX_NIC_GBPS = 800.0  # the fastest NIC port shipping (ConnectX-8, InfiniBand XDR): a faster rate is a node's


def rate_gbps(match: re.Match[str], first: int) -> float:
    """Gb/s of the rate RATE matched with its number at group `first`."""
    number, prefix, letters, per = (match.group(first + k) for k in range(4))
    in_bytes = letters.lower().startswith("byte") or (letters == "B" and per in ("/s", "ps"))
    return float(number) * (1000.0 if prefix.upper() == "T" else 1.0) * (8.0 if in_bytes else 1.0)


@dataclass(frozen=True)
class DescribedNics:
    """What a network description states: the NICs' count (None: not stated) and the rate it gives (None: none),
    a NIC's or, where `node_total`, the server's."""

    count: int | None
    rate_gbps: float | None
    node_total: bool

    def nic_gbps(self, count: int) -> float | None:
        """One NIC's rate when the server has `count` of them."""
        if self.rate_gbps is None:
            return None
        return self.rate_gbps / count if self.node_total else self.rate_gbps


def described_nics(text: str) -> DescribedNics:
    """The NICs' count and rate `text` states (module docstring); either may be None."""
    rate: float | None = None
    if (found := re.search(RATE, text, re.IGNORECASE)) is not None:
        rate = rate_gbps(found, 1)
    elif (short := _SHORT_RATE.search(text)) is not None:
        rate = float(short.group(1))
    elif (generation := _IB_GENERATION.search(text)) is not None:
        rate = float(generation.group(2) or _IB_GENERATION_GBPS[generation.group(1).lower()])
    count: int | None = None
    if (count_match := _NIC_COUNT.search(text)) is not None:
        word = count_match.group(1).lower()
        count = _COUNT_WORDS[word] if word in _COUNT_WORDS else int(word)
    elif rate is not None and (trailing := _TRAILING_COUNT.search(text)) is not None:
        count = int(trailing.group(1))
    total = bool(_NODE_TOTAL.search(text)) or (rate is not None and rate > MAX_NIC_GBPS)
    return DescribedNics(count, rate, total)
