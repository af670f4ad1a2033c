"""Prompts and reply schemas of ``memoryos`` (our wording; the tasks are those of Kang et al. 2025).

Five write-side calls, all on the ``memory_writer`` role with a JSON schema: whether a page
continues the previous one, the conversation chain's meta information, the topic summaries of the
pages leaving short-term memory, the user's updated profile, and the knowledge extracted from a
hot segment (user facts and what the assistant itself said or committed to).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, StringConstraints

Line = Annotated[str, StringConstraints(strip_whitespace=True, max_length=400)]


class Continuity(BaseModel):
    reason: str = Field(max_length=400)
    continuous: bool


class MetaInfo(BaseModel):
    meta_info: str = Field(max_length=800)


class Theme(BaseModel):
    theme: str = Field(max_length=120)
    keywords: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]] = \
        Field(max_length=8)
    summary: str = Field(max_length=600)


class Themes(BaseModel):
    themes: list[Theme] = Field(min_length=1, max_length=3)


class Profile(BaseModel):
    profile: str = Field(max_length=2000)


class Knowledge(BaseModel):
    user_knowledge: list[Line] = Field(max_length=10)
    assistant_knowledge: list[Line] = Field(max_length=10)


CONTINUITY_SYSTEM = (
    "You read two consecutive exchanges between a user and an assistant. Decide whether the second one "
    "continues the same conversation thread as the first (same topic or a direct follow-up) or starts a "
    "new one. Reply with JSON only: {\"reason\": \"<one sentence>\", \"continuous\": true or false}"
)

META_SYSTEM = (
    "You keep a short overview of an ongoing conversation thread between a user and an assistant. Given "
    "the overview so far (possibly empty) and the newest exchange, write the updated overview in at most "
    "three sentences: what the thread is about and what the user wants. Reply with JSON only: "
    "{\"meta_info\": \"<overview>\"}"
)

THEMES_SYSTEM = (
    "You organise a conversation between a user and an assistant into topics. List the one to three main "
    "topics it covers. For each give a short name, up to five keywords (single words or short phrases) "
    "and a summary of two or three sentences of what was said about it, including the user's own details. "
    "Reply with JSON only: {\"themes\": [{\"theme\": \"<name>\", \"keywords\": [\"<keyword>\"], "
    "\"summary\": \"<summary>\"}]}"
)

PROFILE_SYSTEM = (
    "You maintain a profile of one user: personality, preferences, habits, values, circumstances and "
    "goals, as shown by their conversations with an assistant. Given the current profile and new "
    "conversation pages, write the complete updated profile: keep what still holds, revise what the new "
    "pages change, add what they reveal. Use only what the user says or clearly implies. Reply with JSON "
    "only: {\"profile\": \"<the full updated profile>\"}"
)

KNOWLEDGE_SYSTEM = (
    "From the conversation pages below, extract two lists of short self-contained statements. "
    "user_knowledge: concrete facts about the user (their situation, plans, possessions, people, past "
    "events, stated preferences). assistant_knowledge: what the assistant told the user or committed to "
    "doing. Leave a list empty when there is nothing. Reply with JSON only: "
    "{\"user_knowledge\": [\"<fact>\"], \"assistant_knowledge\": [\"<statement>\"]}"
)
