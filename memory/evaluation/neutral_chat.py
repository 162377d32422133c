"""A short neutral chat, written for this project: the turns a benchmark question follows when the loaded
file holds one conversation only (`agent_run.chat_before`), so that they never come from the memory
being searched. It is about nothing a LoCoMo conversation's questions ask."""

from __future__ import annotations

NEUTRAL_CHAT: tuple[tuple[str, str], ...] = (
    ("user", "Can you remind me how long to boil an egg so the yolk stays soft?"),
    ("assistant", "About six minutes from boiling water, then a minute in cold water to stop the cooking."),
    ("user", "Thanks. And how many grams of pasta per person is usual?"),
    ("assistant", "Around 80 to 100 grams of dry pasta per person for a main course."),
    ("user", "What is a quick way to convert Fahrenheit to Celsius in my head?"),
    ("assistant", "Subtract 30 and halve it: 70 F is roughly 20 C. It is close enough for the weather."),
    ("user", "Good trick. How do I stop my bread from going stale so fast?"),
    ("assistant", "Keep it in a cloth bag or a bread box, not the fridge, and freeze slices you will not eat soon."),
    ("user", "Which is better for a small balcony, basil or rosemary?"),
    ("assistant", "Rosemary copes with wind and dry soil; basil wants sun, shelter and regular water."),
    ("user", "Ok. Is it fine to water plants in the evening?"),
    ("assistant", "Yes, early morning is a little better, but evening watering is fine if the leaves stay dry."),
)
