"""Word lists the free-text rules of the protocol-B scorer look for (paper App. C.2; upstream rules).

Structured answers are scored field by field; free-text answers (the upstream judge's, or a reader
that ignored the schema) are scored by looking for these signals. Matching is by lower-case
substring unless a list says otherwise, as upstream does, so "stale" also finds "stale-dated".
"""

from __future__ import annotations

#: Words that say a value changed (temporal direction in free text).
CHANGE_WORDS: tuple[str, ...] = (
    "change", "switch", "move", "transfer", "update", "adopt", "went to", "replace", "took over",
    "cancel", "transition", "migrat",
)
#: The looser list the no-structured-gold temporal rule uses ("new" counts there).
CHANGE_WORDS_LOOSE: tuple[str, ...] = CHANGE_WORDS + ("new",)

#: Phrases that deny a change (change detection in free text).
NO_CHANGE_PHRASES: tuple[str, ...] = (
    "not changed", "hasn't changed", "has not changed", "did not change", "didn't change",
    "no change", "unchanged", "remains", "remained", "still",
)

#: Who-said-it words by the gold trigger's subject (temporal trigger in free text).
TRIGGER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "user": ("user", "they", "the person", "their", "i "),
    "stated": ("stated", "said", "told", "mentioned", "announced", "communicated", "explained", "noted"),
    "organizers": ("organizers", "conference", "committee", "official"),
    "team": ("team", "agreed", "decided", "consensus", "voted"),
}

#: Source concepts a free-text gold may name, and how a prediction may say the same.
SOURCE_EQUIVALENCES: dict[str, tuple[str, ...]] = {
    "user explicitly stated": ("user stated", "user said", "user communicated", "user told", "user mentioned",
                               "user announced", "from the user", "the user directly", "user explicitly"),
    "assistant": ("assistant stated", "assistant said", "assistant hallucinated", "assistant error",
                  "assistant introduced"),
    "third_party": ("third party", "someone else", "colleague", "friend", "another person", "external source"),
    "reactivat": ("reactivat", "recall", "remember", "referred back", "brought up the old",
                  "mentioned the previous owner", "after first recalling", "after mentioning"),
}
SOURCE_AGENT_WORDS: tuple[str, ...] = ("user", "assistant", "they", "the person", "colleague", "friend")
SOURCE_ACTION_WORDS: tuple[str, ...] = ("stated", "said", "mentioned", "communicated", "confirmed", "denied",
                                        "rejected", "corrected", "introduced", "error")
SOURCE_VERDICT_WORDS: tuple[str, ...] = ("remains", "still", "unchanged", "not", "did not", "switched",
                                         "changed", "transferred", "took over")

#: Normalized source classes: what a reader may write → the class the gold uses.
SOURCE_CLASS_ALIASES: dict[str, str] = {
    "third-party": "third_party", "thirdparty": "third_party", "third party": "third_party",
    "hallucination": "assistant", "assistant_hallucination": "assistant", "assistant_error": "assistant",
    "stale": "stale_tool", "stale tool": "stale_tool", "stale-tool": "stale_tool",
    "user_explicit": "user",
}
#: conflict_gold.source → source class.
GOLD_SOURCE_CLASS: dict[str, str] = {
    "assistant_hallucination": "assistant", "third_party": "third_party", "stale_tool": "stale_tool",
}
#: Episode condition → source class of the perturbation, when there is no conflict gold.
CONDITION_SOURCE_CLASS: dict[str, str] = {
    "user_explicit": "user", "authoritative_update": "user", "reactivated": "user", "direct": "user",
    "high": "user", "low": "user",
    "assistant_noise": "assistant",
    "third_party_noise": "third_party", "decoy_no_update": "third_party",
    "high_weak_challenge": "third_party", "low_weak_challenge": "third_party",
    "reactivated_weak": "third_party", "direct_weak": "third_party",
    "stale_tool": "stale_tool",
}
#: Status classes: what a reader may write → the class the gold uses (gold different_entity = other_entity).
STATUS_CLASS_ALIASES: dict[str, str] = {
    "different_entity": "other_entity", "not accepted": "not_accepted", "not_confirmed": "not_accepted",
    "rejected": "not_accepted", "other entity": "other_entity", "outdated": "stale",
}
GOLD_STATUS_CLASS: dict[str, str] = {
    "not_accepted": "not_accepted", "different_entity": "other_entity", "other_entity": "other_entity",
    "stale": "stale", "hypothetical": "hypothetical",
}

#: Free-text conflict probes: words that point at each source of a conflicting value.
CONFLICT_SOURCE_SIGNALS: dict[str, tuple[str, ...]] = {
    "assistant_hallucination": ("assistant", "hallucin", "made up", "fabricat", "error", "incorrect", "mistake",
                                "wrong", "generated"),
    "third_party": ("colleague", "friend", "coworker", "teammate", "someone", "third party", "third-party",
                    "another person", "jamie", "they mentioned", "was mentioned by", "their", "new hire",
                    "suggested", "suggestion", "rumor", "speculation"),
    "stale_tool": ("stale", "outdated", "old", "cached", "dashboard", "onboarding doc", "out of date",
                   "out-of-date", "no longer"),
}
#: … and at each status of it.
CONFLICT_STATUS_SIGNALS: dict[str, tuple[str, ...]] = {
    "not_accepted": ("not accepted", "not adopted", "rejected", "didn't adopt", "did not adopt", "didn't accept",
                     "did not accept", "not confirmed", "speculative", "rumor", "unverified", "suggested",
                     "proposed", "considered", "hypothetical", "not the user", "not yours", "not their",
                     "not his", "not her", "guest pass", "one-time", "temporary", "promo", "might take over",
                     "may take over", "helping with"),
    "different_entity": ("different", "separate", "another", "other", "not the user's", "not yours", "not this",
                         "their service", "their project", "their team", "a colleague's", "a friend's",
                         "a teammate's", "for a different", "for another", "for marcus", "not for your",
                         "not for the user", "not for this", "mock", "local test", "frontend"),
    "stale": ("stale", "outdated", "out of date", "out-of-date", "no longer valid", "no longer current",
              "deprecated", "old version", "old config", "cached", "was previously"),
}
#: Words saying the conflicting value does not apply to the target fact.
NOT_APPLICABLE_SIGNALS: tuple[str, ...] = (
    "not the user", "not yours", "not this service", "not this project", "not for your", "not for the user",
    "not for this", "remains", "still", "unchanged", "didn't change", "did not change", "hasn't changed",
    "not updated", "kept", "stuck with", "sticking with", "current", "is still", "stayed", "was not adopted",
    "not adopted", "separate service", "separate project", "different project", "different service",
    "another service", "another project", "not as the user's", "but not", "not the same",
)
#: Words saying it does apply (an accepted conflicting value).
APPLICABLE_SIGNALS: tuple[str, ...] = (
    "accepted", "adopted", "confirmed", "switched", "changed to", "updated to", "moved to", "now using",
)
#: Words saying no conflicting value was mentioned.
NO_CONFLICT_SIGNALS: tuple[str, ...] = ("no", "none", "not", "no conflict", "wasn't", "were not")

# --- the upstream scorer's own tables (scoring mode "upstream"; scoring_upstream.py) -----------------
#: Change words of upstream's temporal rule without structured gold: "new" counts, "migrat" does not.
UPSTREAM_LEGACY_CHANGE_WORDS: tuple[str, ...] = (
    "change", "switch", "move", "transfer", "update", "adopt", "went to", "new", "replace", "took over",
    "cancel", "transition",
)
#: Change detection in free text: phrases that cancel a "changed" …
UPSTREAM_NOT_CHANGED: tuple[str, ...] = (
    "not changed", "hasn't changed", "did not change", "didn't change", "no change", "unchanged",
)
#: … and phrases that deny a change (substrings: "no" is also in "now" and "know").
UPSTREAM_DENY: tuple[str, ...] = ("no", "remains", "did not change", "hasn't changed", "didn't change",
                                  "not changed", "unchanged", "no change")
UPSTREAM_SOURCE_CLASS_ALIASES: dict[str, str] = {
    "third-party": "third_party", "thirdparty": "third_party", "hallucination": "assistant",
    "assistant_hallucination": "assistant",
}
UPSTREAM_STATUS_CLASS_ALIASES: dict[str, str] = {
    "different_entity": "other_entity", "not accepted": "not_accepted", "not_confirmed": "not_accepted",
}
UPSTREAM_GOLD_STATUS_CLASS: dict[str, str] = {
    "not_accepted": "not_accepted", "different_entity": "other_entity", "stale": "stale",
}
