"""Widgets of the replay UI, one per module. Lists are Line-API widgets (OptionList, DataTable,
RichLog, Log) fed with a screen's worth of rows, never one widget per event."""
