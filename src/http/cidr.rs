//! IP networks: the allow and deny lists, and the network a client is keyed
//! by (an IPv6 client holds a whole /64 or more and could take a fresh
//! address per request). IPv4-mapped IPv6 addresses are folded to IPv4, in
//! lists and lookups alike.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A network: an address with its host bits zero, and a prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    network: IpAddr,
    len: u8,
}

impl Cidr {
    /// Accepts `addr/len` or a bare address (a single host). Host bits set
    /// below the prefix are refused rather than masked: `10.0.0.1/8` is more
    /// likely a typo than a way of writing `10.0.0.0/8`.
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (addr_text, len_text) = match text.split_once('/') {
            Some((addr, len)) => (addr, Some(len)),
            None => (text, None),
        };
        let addr: IpAddr = addr_text
            .parse()
            .map_err(|_| format!("{addr_text:?} is not an IP address"))?;
        let max = width(addr);
        let len = match len_text {
            None => max,
            Some(len) => parse_len(len, max)?,
        };
        let network = mask(addr, len);
        if network != addr {
            return Err(format!(
                "{text} has bits set below /{len}; did you mean {network}/{len}?"
            ));
        }
        Ok(match addr {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) if len >= 96 => Cidr {
                    network: IpAddr::V4(v4),
                    len: len - 96,
                },
                _ => Cidr { network, len },
            },
            IpAddr::V4(_) => Cidr { network, len },
        })
    }

    /// The network of `len` bits that holds `ip` (IPv4-mapped addresses as
    /// IPv4; `len` at most the family's width).
    pub fn holding(ip: IpAddr, len: u8) -> Cidr {
        let ip = ip.to_canonical();
        let len = len.min(width(ip));
        Cidr {
            network: mask(ip, len),
            len,
        }
    }

    /// The prefix length, and whether the network is IPv6.
    pub fn shape(&self) -> (bool, u8) {
        (self.network.is_ipv6(), self.len)
    }

    /// Whether `ip` is in this network. IPv4 addresses never match an IPv6
    /// network (not even `::/0`), nor IPv6 an IPv4 one.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        width(ip) == width(self.network) && mask(ip, self.len) == self.network
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.len)
    }
}

/// A configured list of networks. Lists are config-sized (tens of entries),
/// so `contains` scans them linearly rather than building a trie.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CidrList(Vec<Cidr>);

impl CidrList {
    /// Fails on the first bad item, with its index so the error can name it.
    pub fn parse<S: AsRef<str>>(items: &[S]) -> Result<CidrList, (usize, String)> {
        let mut cidrs = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            cidrs.push(Cidr::parse(item.as_ref()).map_err(|why| (i, why))?);
        }
        Ok(CidrList(cidrs))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|cidr| cidr.contains(ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Cidr> {
        self.0.iter()
    }
}

/// The key for a client address: IPv4 as is; IPv6 as its first
/// `ipv6_prefix` bits, written `2001:db8:1:2::/64`, or as the full address
/// when `ipv6_prefix` is 128 (larger values are treated as 128).
pub fn client_network(ip: IpAddr, ipv6_prefix: u8) -> String {
    match ip.to_canonical() {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) if ipv6_prefix >= 128 => v6.to_string(),
        v6 => format!("{}/{ipv6_prefix}", mask(v6, ipv6_prefix)),
    }
}

fn width(ip: IpAddr) -> u8 {
    match ip {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// Digits only: `u8::from_str` would also take `+8`.
fn parse_len(text: &str, max: u8) -> Result<u8, String> {
    let digits = text.bytes().all(|b| b.is_ascii_digit());
    match digits.then(|| text.parse::<u8>().ok()).flatten() {
        Some(len) if len <= max => Ok(len),
        _ => Err(format!(
            "prefix length {text:?} is not a number from 0 to {max}"
        )),
    }
}

/// `ip` with every bit past the first `len` cleared.
fn mask(ip: IpAddr, len: u8) -> IpAddr {
    let len = u32::from(len);
    match ip {
        IpAddr::V4(v4) => {
            let host = u32::MAX.checked_shr(len).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(v4) & !host))
        }
        IpAddr::V6(v6) => {
            let host = u128::MAX.checked_shr(len).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !host))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn net(text: &str) -> Cidr {
        Cidr::parse(text).unwrap()
    }

    #[test]
    fn v4_membership_at_the_edges() {
        let cidr = net("10.1.0.0/16");
        assert!(cidr.contains(ip("10.1.0.0")));
        assert!(cidr.contains(ip("10.1.255.255")));
        assert!(!cidr.contains(ip("10.0.255.255")));
        assert!(!cidr.contains(ip("10.2.0.0")));
        assert_eq!(cidr.to_string(), "10.1.0.0/16");
    }

    #[test]
    fn v6_membership_at_the_edges() {
        let cidr = net("2001:db8::/32");
        assert!(cidr.contains(ip("2001:db8::")));
        assert!(cidr.contains(ip("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!cidr.contains(ip("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!cidr.contains(ip("2001:db9::")));
        let odd = net("2001:db8:8000::/33");
        assert!(odd.contains(ip("2001:db8:ffff::1")));
        assert!(!odd.contains(ip("2001:db8:7fff::1")));
    }

    #[test]
    fn zero_prefix_matches_its_own_family_only() {
        let all_v4 = net("0.0.0.0/0");
        assert!(all_v4.contains(ip("0.0.0.0")));
        assert!(all_v4.contains(ip("255.255.255.255")));
        assert!(!all_v4.contains(ip("::1")));
        let all_v6 = net("::/0");
        assert!(all_v6.contains(ip("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")));
        assert!(!all_v6.contains(ip("192.0.2.1")));
        assert!(!all_v6.contains(ip("::ffff:192.0.2.1")));
    }

    #[test]
    fn full_length_prefixes_and_bare_addresses_are_single_hosts() {
        assert_eq!(net("192.0.2.7"), net("192.0.2.7/32"));
        assert_eq!(net("2001:db8::7"), net("2001:db8::7/128"));
        assert_eq!(net("192.0.2.7").to_string(), "192.0.2.7/32");
        assert_eq!(net("2001:DB8::7").to_string(), "2001:db8::7/128");
        assert!(net("192.0.2.7").contains(ip("192.0.2.7")));
        assert!(!net("192.0.2.7").contains(ip("192.0.2.8")));
        assert!(net("2001:db8::7/128").contains(ip("2001:db8::7")));
        assert!(!net("2001:db8::7/128").contains(ip("2001:db8::6")));
    }

    #[test]
    fn mapped_addresses_fold_to_v4() {
        assert_eq!(net("::ffff:192.0.2.1"), net("192.0.2.1"));
        assert_eq!(net("::ffff:10.0.0.0/104"), net("10.0.0.0/8"));
        assert_eq!(net("::ffff:0:0/96"), net("0.0.0.0/0"));
        assert!(net("10.0.0.0/8").contains(ip("::ffff:10.9.8.7")));
        assert!(!net("10.0.0.0/8").contains(ip("::ffff:11.0.0.1")));
        assert!(net("::ffff:10.0.0.0/104").contains(ip("10.9.8.7")));
        let wider = net("::/80");
        assert_eq!(wider.to_string(), "::/80");
        assert!(!wider.contains(ip("::ffff:10.0.0.1")));
    }

    #[test]
    fn host_bits_below_the_prefix_are_an_error() {
        assert_eq!(
            Cidr::parse("10.0.0.1/8"),
            Err("10.0.0.1/8 has bits set below /8; did you mean 10.0.0.0/8?".into())
        );
        assert_eq!(
            Cidr::parse("2001:db8::1/64"),
            Err("2001:db8::1/64 has bits set below /64; did you mean 2001:db8::/64?".into())
        );
        assert!(Cidr::parse("::ffff:10.0.0.1/104").is_err());
        assert!(Cidr::parse("0.0.0.1/0").is_err());
    }

    #[test]
    fn bad_prefixes_and_addresses_are_errors() {
        for text in [
            "10.0.0.0/33",
            "10.0.0.0/-1",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "10.0.0.0/8/8",
            "10.0.0.0/256",
            "::/129",
            "x/8",
            "/8",
            "",
            " 10.0.0.0/8",
            "10.0.0/8",
        ] {
            assert!(Cidr::parse(text).is_err(), "{text:?}");
        }
        assert_eq!(
            Cidr::parse("10.0.0.0/33"),
            Err(r#"prefix length "33" is not a number from 0 to 32"#.into())
        );
        assert_eq!(
            Cidr::parse("x/8"),
            Err(r#""x" is not an IP address"#.into())
        );
    }

    #[test]
    fn lists_match_any_member_and_report_the_bad_index() {
        let list = CidrList::parse(&["10.0.0.0/8", "2001:db8::/32", "192.0.2.1"]).unwrap();
        assert!(list.contains(ip("10.200.0.1")));
        assert!(list.contains(ip("2001:db8::99")));
        assert!(list.contains(ip("192.0.2.1")));
        assert!(!list.contains(ip("192.0.2.2")));
        assert!(!list.is_empty());

        let empty = CidrList::parse::<&str>(&[]).unwrap();
        assert!(empty.is_empty());
        assert!(!empty.contains(ip("10.0.0.1")));
        assert_eq!(empty, CidrList::default());

        let items = vec!["10.0.0.0/8".to_string(), "::1".into(), "10.0.0.1/8".into()];
        let (index, why) = CidrList::parse(&items).unwrap_err();
        assert_eq!(index, 2);
        assert!(why.contains("did you mean 10.0.0.0/8"), "{why}");
    }

    #[test]
    fn the_network_holding_an_address_is_the_one_parsed() {
        assert_eq!(Cidr::holding(ip("10.200.3.4"), 8), net("10.0.0.0/8"));
        assert_eq!(Cidr::holding(ip("::ffff:10.200.3.4"), 8), net("10.0.0.0/8"));
        assert_eq!(
            Cidr::holding(ip("2001:db8:ffff::1"), 32),
            net("2001:db8::/32")
        );
        assert_eq!(Cidr::holding(ip("192.0.2.7"), 99), net("192.0.2.7"));
        assert_eq!(net("2001:db8::/32").shape(), (true, 32));
        assert_eq!(net("::ffff:10.0.0.0/104").shape(), (false, 8));
    }

    #[test]
    fn client_network_groups_v6_by_prefix() {
        let v6 = ip("2001:db8:1:2:3:4:5:6");
        assert_eq!(client_network(ip("192.0.2.1"), 64), "192.0.2.1");
        assert_eq!(client_network(ip("::ffff:192.0.2.1"), 64), "192.0.2.1");
        assert_eq!(client_network(v6, 64), "2001:db8:1:2::/64");
        assert_eq!(
            client_network(ip("2001:db8:1:2:ffff::1"), 64),
            "2001:db8:1:2::/64"
        );
        assert_eq!(client_network(v6, 48), "2001:db8:1::/48");
        assert_eq!(client_network(v6, 56), "2001:db8:1::/56");
        assert_eq!(client_network(v6, 128), "2001:db8:1:2:3:4:5:6");
        assert_eq!(client_network(v6, 200), "2001:db8:1:2:3:4:5:6");
        assert_eq!(client_network(v6, 0), "::/0");
    }
}
