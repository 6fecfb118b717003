"""Forms of the collections page and the chat's collection picker: every field checked at the border."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy

from chat.knowledge.models import CollectionShare

NO_SUCH_PERSON = gettext_lazy("No such person.")
NO_SUCH_GROUP = gettext_lazy("No such group.")
BAD_ACCESS = gettext_lazy("Access is read or edit.")


class CollectionForm(forms.Form):
    name = forms.CharField(max_length=100)
    slug = forms.CharField(max_length=51)


class RenameCollectionForm(forms.Form):
    name = forms.CharField(max_length=100)


class ShareForm(forms.Form):
    username = forms.CharField(max_length=150)
    access = forms.ChoiceField(choices=CollectionShare.Access.choices, error_messages={"invalid_choice": BAD_ACCESS})

    def clean_username(self):
        person = get_user_model().objects.filter(username=self.cleaned_data["username"].strip(), is_active=True).first()
        if person is None:
            raise ValidationError(NO_SUCH_PERSON)
        return person


class GroupShareForm(forms.Form):
    group = forms.ModelChoiceField(Group.objects.all(), error_messages={"invalid_choice": NO_SUCH_GROUP})
    access = forms.ChoiceField(choices=CollectionShare.Access.choices, error_messages={"invalid_choice": BAD_ACCESS})


class EveryoneForm(forms.Form):
    shared = forms.BooleanField(required=False)


class PickForm(forms.Form):
    collections = forms.TypedMultipleChoiceField(coerce=int, required=False)

    def __init__(self, *args, choices: list[tuple[int, str]], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collections"].choices = choices
