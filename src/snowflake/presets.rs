//! Well-known layouts: the bit layouts of IDs that other systems make, to read them, and to
//! make them where they fit this crate's model. Pure.
//!
//! A [`Layout`] is time | datacenter | worker | sequence in 63 bits, counted in
//! milliseconds. Of the presets only Twitter's fits that; the others are decode-only:
//! Discord's and Instagram's IDs use all 64 bits (IDs of 2^63 and above are theirs too),
//! Instagram's and Mastodon's fields are not the four, and Sonyflake counts 10 ms ticks with
//! its sequence above its machine number. Making Sonyflake IDs would take a second time
//! unit through the clocks, the marks and the leases, all in milliseconds; it is left out.
//!
//! Each preset is checked in the tests against an ID published with its decoded values
//! (sources in the tests).

use core::fmt;
use core::str::FromStr;

use super::layout::Layout;

/// A layout whose IDs other systems make.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Preset {
    /// Twitter's Snowflake: 41 bits of ms since 2010-11-04T01:42:54.657Z, 5 bits of
    /// datacenter, 5 of worker, 12 of sequence; the top bit unused. Fits [`Layout`].
    Twitter,
    /// Discord's: 42 bits of ms since 2015-01-01T00:00:00Z, 5 bits of worker, 5 of process,
    /// 12 of increment: all 64 bits.
    Discord,
    /// Instagram's: 41 bits of ms since 2011-08-24T21:07:01.721Z (the epoch of the
    /// engineering blog's code), 13 bits of shard, 10 of sequence: all 64 bits.
    Instagram,
    /// Sony's Sonyflake: 39 bits of 10 ms ticks since 2014-09-01T00:00:00Z, 8 bits of
    /// sequence, then 16 of machine; the top bit unused. (Sonyflake v2 makes the widths,
    /// the tick and the start configurable; this is v1's layout.)
    Sonyflake,
    /// Mastodon's: 48 bits of Unix ms, then 16 bits of sequence data (a hash and a counter,
    /// no field to read); IDs below 2^63 (a PostgreSQL `bigint`).
    Mastodon,
}

/// A field of a preset's IDs below the time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PresetField {
    /// Its name in the preset owner's documentation.
    pub name: &'static str,
    /// Its width.
    pub bits: u32,
}

/// What a preset's ID says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresetParts {
    /// When it was made, in Unix milliseconds (to the preset's tick: 10 ms for Sonyflake).
    pub unix_ms: u64,
    /// The fields below the time, most significant first, as (name, value).
    pub fields: Vec<(&'static str, u64)>,
}

/// An ID that a preset's owner cannot have made: it sets a bit the preset leaves unused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotAPresetId {
    /// The preset.
    pub preset: Preset,
    /// The ID.
    pub id: u64,
}

impl fmt::Display for NotAPresetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is not a {} ID: its IDs lie between 0 and {}",
            self.id,
            self.preset.name(),
            self.preset.max_id()
        )
    }
}

impl std::error::Error for NotAPresetId {}

/// A name that names no preset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownPreset(pub String);

impl fmt::Display for UnknownPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = Preset::ALL.iter().map(|preset| preset.name()).collect();
        write!(f, "no preset {:?}: one of {}", self.0, names.join(", "))
    }
}

impl std::error::Error for UnknownPreset {}

const fn field(name: &'static str, bits: u32) -> PresetField {
    PresetField { name, bits }
}

impl Preset {
    /// Every preset.
    pub const ALL: &'static [Preset] = &[
        Preset::Twitter,
        Preset::Discord,
        Preset::Instagram,
        Preset::Sonyflake,
        Preset::Mastodon,
    ];

    /// Its name, in lower case, as `idgen --preset` takes it.
    pub const fn name(self) -> &'static str {
        match self {
            Preset::Twitter => "twitter",
            Preset::Discord => "discord",
            Preset::Instagram => "instagram",
            Preset::Sonyflake => "sonyflake",
            Preset::Mastodon => "mastodon",
        }
    }

    /// The instant its time counts from, in Unix milliseconds.
    pub const fn epoch_unix_ms(self) -> u64 {
        match self {
            Preset::Twitter => 1_288_834_974_657,
            Preset::Discord => 1_420_070_400_000,
            Preset::Instagram => 1_314_220_021_721,
            Preset::Sonyflake => 1_409_529_600_000,
            Preset::Mastodon => 0,
        }
    }

    /// Its tick, in milliseconds.
    pub const fn tick_ms(self) -> u64 {
        match self {
            Preset::Sonyflake => 10,
            _ => 1,
        }
    }

    /// The width of its time field, the most significant one it uses.
    pub const fn time_bits(self) -> u32 {
        match self {
            Preset::Twitter | Preset::Instagram => 41,
            Preset::Discord => 42,
            Preset::Sonyflake => 39,
            Preset::Mastodon => 48,
        }
    }

    /// The fields below the time, most significant first.
    pub const fn fields(self) -> &'static [PresetField] {
        const TWITTER: &[PresetField] = &[
            field("datacenter", 5),
            field("worker", 5),
            field("sequence", 12),
        ];
        const DISCORD: &[PresetField] = &[
            field("worker", 5),
            field("process", 5),
            field("increment", 12),
        ];
        const INSTAGRAM: &[PresetField] = &[field("shard", 13), field("sequence", 10)];
        const SONYFLAKE: &[PresetField] = &[field("sequence", 8), field("machine", 16)];
        const MASTODON: &[PresetField] = &[field("sequence data", 16)];
        match self {
            Preset::Twitter => TWITTER,
            Preset::Discord => DISCORD,
            Preset::Instagram => INSTAGRAM,
            Preset::Sonyflake => SONYFLAKE,
            Preset::Mastodon => MASTODON,
        }
    }

    /// How many bits its fields span, the time's included: 63 or 64.
    pub const fn id_bits(self) -> u32 {
        let fields = self.fields();
        let mut bits = self.time_bits();
        let mut i = 0;
        while i < fields.len() {
            bits += fields[i].bits;
            i += 1;
        }
        bits
    }

    /// Its largest ID: 2^64 − 1 for Discord's and Instagram's, which use all 64 bits;
    /// 2^63 − 1 for the others (Mastodon's fields span 64 bits, but its IDs are PostgreSQL
    /// `bigint`s).
    pub const fn max_id(self) -> u64 {
        match self {
            Preset::Discord | Preset::Instagram => u64::MAX,
            Preset::Twitter | Preset::Sonyflake | Preset::Mastodon => i64::MAX as u64,
        }
    }

    /// Its [`Layout`], for a preset that fits one (Twitter's): this crate then makes its
    /// IDs. None for the decode-only presets.
    ///
    /// ```
    /// use idgen::{Layout, Preset};
    /// let twitter = Preset::Twitter.layout().unwrap();
    /// assert_eq!(twitter.epoch_unix_ms(), 1_288_834_974_657);
    /// assert_eq!(Preset::Discord.layout(), None); // 64 bits: decode only
    /// ```
    pub fn layout(self) -> Option<Layout> {
        match self {
            Preset::Twitter => Layout::new(41, 5, 5, 12)
                .and_then(|layout| layout.with_epoch_unix_ms(1_288_834_974_657))
                .ok(),
            _ => None,
        }
    }

    /// What `id` says under this preset; an error above its [`Preset::max_id`] (2^63 − 1
    /// for Twitter, Sonyflake and Mastodon).
    ///
    /// Any ID up to that decodes, IDs the owner made before adopting the layout too:
    /// Twitter's from before November 2010 and Mastodon's from before 2017 were counters,
    /// and read as dates near the epoch.
    ///
    /// ```
    /// use idgen::Preset;
    /// // The example of Discord's API documentation.
    /// let parts = Preset::Discord.decode(175_928_847_299_117_063)?;
    /// assert_eq!(parts.unix_ms, 1_462_015_105_796); // 2016-04-30T11:18:25.796Z
    /// assert_eq!(parts.fields, [("worker", 1), ("process", 0), ("increment", 7)]);
    /// # Ok::<(), idgen::NotAPresetId>(())
    /// ```
    pub fn decode(self, id: u64) -> Result<PresetParts, NotAPresetId> {
        if id > self.max_id() {
            return Err(NotAPresetId { preset: self, id });
        }
        let mut shift = self.id_bits() - self.time_bits();
        let mut fields = Vec::with_capacity(self.fields().len());
        for field in self.fields() {
            shift -= field.bits;
            fields.push((field.name, (id >> shift) & ((1 << field.bits) - 1)));
        }
        let ticks = id >> (self.id_bits() - self.time_bits());
        // At most 2^42 ticks of at most 10 ms from an epoch before 2015: no overflow.
        let unix_ms = self.epoch_unix_ms() + ticks * self.tick_ms();
        Ok(PresetParts { unix_ms, fields })
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = UnknownPreset;

    /// A preset by its name, in any case.
    fn from_str(name: &str) -> Result<Preset, UnknownPreset> {
        Preset::ALL
            .iter()
            .copied()
            .find(|preset| preset.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownPreset(name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Id;

    /// Twitter: a tweet by @Wikipedia, whose ID Wikipedia's "Snowflake ID" article decodes
    /// ("367597485448 ... June 28, 2022 16:07:40.105 UTC"); and the IDs of Twitter's own
    /// `IdWorkerSpec.scala` (tag snowflake-2010), a worker at datacenter 0, worker 0, one
    /// ms after the epoch: `(id >> 22) == 1`, sequences 0, 1, 2.
    #[test]
    fn twitter_ids_decode_as_published_and_the_layout_agrees() {
        let parts = Preset::Twitter.decode(1_541_815_603_606_036_480).unwrap();
        assert_eq!(parts.unix_ms, 1_656_432_460_105);
        assert_eq!(
            parts.fields,
            [("datacenter", 11), ("worker", 26), ("sequence", 0)]
        );
        let layout = Preset::Twitter.layout().unwrap();
        let id = Id::try_from(1_541_815_603_606_036_480u64).unwrap();
        let by_layout = layout.decode(id);
        assert_eq!(by_layout.unix_ms, 1_656_432_460_105);
        assert_eq!(
            (by_layout.datacenter, by_layout.worker, by_layout.sequence),
            (11, 26, 0)
        );
        for sequence in 0..3 {
            let parts = Preset::Twitter.decode(4_194_304 + sequence).unwrap();
            assert_eq!(parts.unix_ms, 1_288_834_974_658);
            assert_eq!(
                parts.fields,
                [("datacenter", 0), ("worker", 0), ("sequence", sequence)]
            );
        }
    }

    /// Discord: the example of its API documentation ("Snowflakes",
    /// discord/discord-api-docs `developers/reference.mdx`): 175928847299117063 is
    /// 2016-04-30 11:18:25.796 UTC, worker 1, process 0, increment 7.
    #[test]
    fn discord_ids_decode_as_published_and_use_all_64_bits() {
        let parts = Preset::Discord.decode(175_928_847_299_117_063).unwrap();
        assert_eq!(parts.unix_ms, 1_462_015_105_796);
        assert_eq!(
            parts.fields,
            [("worker", 1), ("process", 0), ("increment", 7)]
        );
        // Discord IDs pass 2^63 in 2084: still IDs.
        let top = Preset::Discord.decode(u64::MAX).unwrap();
        assert_eq!(top.unix_ms, 1_420_070_400_000 + (1 << 42) - 1);
        assert_eq!(
            top.fields,
            [("worker", 31), ("process", 31), ("increment", 4095)]
        );
        let first_above_2_63 = Preset::Discord.decode(1 << 63).unwrap();
        assert_eq!(first_above_2_63.unix_ms, 1_420_070_400_000 + (1 << 41));
        assert_eq!(Preset::Discord.layout(), None);
    }

    /// Instagram: the worked example of "Sharding & IDs at Instagram" (1387263000 ms into
    /// the epoch, shard 31341 % 2000 = 1341, sequence 5001 % 1024 = 905; the post gives the
    /// fields, the ID is their composition), and an ID that unfurl's tests decode
    /// (obsidianforensics/unfurl `test_instagram.py`: shard 958, sequence 453, 1775580510621).
    #[test]
    fn instagram_ids_decode_as_published() {
        let worked = (1_387_263_000u64 << 23) | (1341 << 10) | 905;
        assert_eq!(worked, 11_637_205_501_278_089);
        let parts = Preset::Instagram.decode(worked).unwrap();
        assert_eq!(parts.unix_ms, 1_314_220_021_721 + 1_387_263_000);
        assert_eq!(parts.fields, [("shard", 1341), ("sequence", 905)]);
        let parts = Preset::Instagram.decode(3_870_172_288_071_432_645).unwrap();
        assert_eq!(parts.unix_ms, 1_775_580_510_621);
        assert_eq!(parts.fields, [("shard", 958), ("sequence", 453)]);
        assert!(Preset::Instagram.decode(u64::MAX).is_ok());
    }

    /// Sonyflake: no ID with its decoded values in sony/sonyflake itself; this one is from
    /// unfurl's tests (`test_sonyflake.py`: hex 45eec4a4600041b, 2020-08-12 17:35:29.98,
    /// machine 4.27, i.e. 0x041b), decoded with the layout of sonyflake.go (`toID`: time
    /// << 24 | sequence << 16 | machine, 10 ms ticks from 2014-09-01).
    #[test]
    fn sonyflake_ids_decode_in_ticks_with_the_sequence_above_the_machine() {
        let parts = Preset::Sonyflake.decode(0x045e_ec4a_4600_041b).unwrap();
        assert_eq!(parts.unix_ms, 1_597_253_729_980);
        assert_eq!(parts.fields, [("sequence", 0), ("machine", 0x041b)]);
        let composed = (18_772_412_998u64 << 24) | (7 << 16) | 0x041b;
        let parts = Preset::Sonyflake.decode(composed).unwrap();
        assert_eq!(parts.fields, [("sequence", 7), ("machine", 0x041b)]);
        assert!(Preset::Sonyflake.decode(1 << 63).is_err());
        assert_eq!(Preset::Sonyflake.layout(), None);
    }

    /// Mastodon: the post https://mastodon.social/@Mastodon/98850828346879853, published
    /// 2017-10-18 16:25:38.398 UTC (lib/mastodon/snowflake.rb: 48 bits of ms, 16 of
    /// sequence data).
    #[test]
    fn mastodon_ids_decode_as_published() {
        let parts = Preset::Mastodon.decode(98_850_828_346_879_853).unwrap();
        assert_eq!(parts.unix_ms, 1_508_343_938_398);
        assert_eq!(parts.fields, [("sequence data", 28_525)]);
    }

    /// Every ID a preset takes decodes into fields that put it back together; every other
    /// is refused. Over the edges and 100,000 xorshift values.
    #[test]
    fn the_fields_are_the_whole_id() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let values = [0, 1, (1 << 63) - 1, 1 << 63, u64::MAX].into_iter().chain(
            core::iter::repeat_with(move || {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state
            })
            .take(100_000),
        );
        for id in values {
            for preset in Preset::ALL {
                let Ok(parts) = preset.decode(id) else {
                    assert!(id > preset.max_id(), "{preset} refused {id}");
                    continue;
                };
                let ticks = (parts.unix_ms - preset.epoch_unix_ms()) / preset.tick_ms();
                let mut rebuilt = ticks;
                for (field, (name, value)) in preset.fields().iter().zip(&parts.fields) {
                    assert_eq!(field.name, *name);
                    assert!(*value < 1 << field.bits, "{preset} {name} {value}");
                    rebuilt = (rebuilt << field.bits) | value;
                }
                assert_eq!(rebuilt, id, "{preset}");
            }
        }
    }

    #[test]
    fn names_and_widths() {
        for preset in Preset::ALL {
            assert_eq!(preset.name().parse::<Preset>(), Ok(*preset));
            assert_eq!(preset.name().to_uppercase().parse::<Preset>(), Ok(*preset));
            let bits = preset.id_bits();
            assert!(bits == 63 || bits == 64, "{preset}: {bits}");
            assert_eq!(preset.layout().is_some(), *preset == Preset::Twitter);
            let all_64 = matches!(preset, Preset::Discord | Preset::Instagram);
            assert_eq!(preset.decode(1 << 63).is_ok(), all_64, "{preset}");
            assert_eq!(preset.decode(u64::MAX).is_ok(), all_64, "{preset}");
            assert!(preset.decode((1 << 63) - 1).is_ok(), "{preset}");
        }
        let unknown = "snowflake".parse::<Preset>().unwrap_err();
        assert_eq!(
            unknown.to_string(),
            "no preset \"snowflake\": one of twitter, discord, instagram, sonyflake, mastodon"
        );
        assert_eq!(
            Preset::Twitter.decode(1 << 63).unwrap_err().to_string(),
            "9223372036854775808 is not a twitter ID: its IDs lie between 0 and \
             9223372036854775807"
        );
    }
}
